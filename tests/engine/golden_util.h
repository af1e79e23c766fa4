// Helpers for golden tests against llama.cpp's outputs in tests/data/fixtures:
// reading the raw f32 arrays and run JSONs, and comparing logits.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace vlkv::golden {

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

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline int argmax(const float* x, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = static_cast<int>(i);
  }
  return best;
}

// Top-1 margin of a reference row: best minus runner-up.
inline float margin(const float* x, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > a) { b = a; a = x[i]; } else if (x[i] > b) { b = x[i]; }
  }
  return a - b;
}

struct LogitDiff {
  double max_abs = 0;
  double mean_abs = 0;
  int64_t rows = 0;
  int64_t top1_agree = 0;       // rows whose argmax matches
  int64_t top1_considered = 0;  // rows with reference margin >= min_margin
};

// Compares [rows, n_vocab] arrays; top-1 is counted only where the reference's
// margin is at least min_margin (near-ties may flip under any summation order).
inline LogitDiff compare_logits(const float* ours, const float* ref, int64_t rows, int64_t n_vocab,
                                float min_margin = 0.0f) {
  LogitDiff d;
  d.rows = rows;
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = ours + r * n_vocab;
    const float* b = ref + r * n_vocab;
    for (int64_t i = 0; i < n_vocab; ++i) {
      const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
      d.max_abs = std::max(d.max_abs, e);
      sum += e;
    }
    if (margin(b, n_vocab) >= min_margin) {
      ++d.top1_considered;
      if (argmax(a, n_vocab) == argmax(b, n_vocab)) ++d.top1_agree;
    }
  }
  d.mean_abs = sum / static_cast<double>(rows * n_vocab);
  return d;
}

}  // namespace vlkv::golden
