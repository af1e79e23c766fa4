// Shared by the idefics3 / qwen2vl golden tests: fixture paths, raw f32 arrays, the
// 64x64 test PNG decoded by stb_image (static copy, so it never clashes with the
// library's loader), and max-abs comparison.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vlkv/media.h"

#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb/stb_image.h>

namespace vlkv::vlm_test {

inline std::string fixtures() { return std::string(VLKV_TEST_DATA) + "/fixtures"; }

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

inline Image test_image() {
  const std::string path = fixtures() + "/images/test_image_64.png";
  int w = 0, h = 0, c = 0;
  unsigned char* px = stbi_load(path.c_str(), &w, &h, &c, 3);
  Image img;
  if (!px) return img;
  img.width = w;
  img.height = h;
  img.pixels.assign(px, px + static_cast<size_t>(w) * h * 3);
  stbi_image_free(px);
  return img;
}

inline double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace vlkv::vlm_test
