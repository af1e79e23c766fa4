#include "vision/image_ops.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace vlkv {
namespace {

Image blank(int32_t width, int32_t height) {
  Image out;
  out.width = width;
  out.height = height;
  out.pixels.assign(static_cast<size_t>(width) * height * 3, 0);
  return out;
}

uint8_t px(const Image& img, int64_t x, int64_t y, int c) {
  x = std::clamp<int64_t>(x, 0, img.width - 1);
  y = std::clamp<int64_t>(y, 0, img.height - 1);
  return img.pixels[static_cast<size_t>((y * img.width + x) * 3 + c)];
}

float cubic(float x) {  // Keys kernel, a = -0.5
  constexpr float a = -0.5f;
  x = std::fabs(x);
  if (x <= 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
  if (x < 2.0f) return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
  return 0.0f;
}

}  // namespace

Image resize_bilinear(const Image& src, int32_t width, int32_t height) {
  VLKV_CHECK(src.valid() && width > 0 && height > 0);
  Image out = blank(width, height);
  const float sx = static_cast<float>(src.width) / width;
  const float sy = static_cast<float>(src.height) / height;
  for (int32_t y = 0; y < height; ++y) {
    const float fy = std::max(0.0f, (y + 0.5f) * sy - 0.5f);
    const int64_t y0 = static_cast<int64_t>(fy);
    const float wy = fy - y0;
    for (int32_t x = 0; x < width; ++x) {
      const float fx = std::max(0.0f, (x + 0.5f) * sx - 0.5f);
      const int64_t x0 = static_cast<int64_t>(fx);
      const float wx = fx - x0;
      for (int c = 0; c < 3; ++c) {
        const float top = px(src, x0, y0, c) * (1 - wx) + px(src, x0 + 1, y0, c) * wx;
        const float bot = px(src, x0, y0 + 1, c) * (1 - wx) + px(src, x0 + 1, y0 + 1, c) * wx;
        const float v = top * (1 - wy) + bot * wy;
        out.pixels[static_cast<size_t>((y * width + x) * 3 + c)] =
            static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return out;
}

Image resize_bicubic(const Image& src, int32_t width, int32_t height) {
  VLKV_CHECK(src.valid() && width > 0 && height > 0);
  Image out = blank(width, height);
  const float sx = static_cast<float>(src.width) / width;
  const float sy = static_cast<float>(src.height) / height;
  for (int32_t y = 0; y < height; ++y) {
    const float fy = (y + 0.5f) * sy - 0.5f;
    const int64_t y0 = static_cast<int64_t>(std::floor(fy));
    for (int32_t x = 0; x < width; ++x) {
      const float fx = (x + 0.5f) * sx - 0.5f;
      const int64_t x0 = static_cast<int64_t>(std::floor(fx));
      for (int c = 0; c < 3; ++c) {
        float acc = 0.0f;
        for (int j = -1; j <= 2; ++j) {
          const float wy = cubic(fy - static_cast<float>(y0 + j));
          for (int i = -1; i <= 2; ++i) acc += wy * cubic(fx - static_cast<float>(x0 + i)) * px(src, x0 + i, y0 + j, c);
        }
        out.pixels[static_cast<size_t>((y * width + x) * 3 + c)] =
            static_cast<uint8_t>(std::clamp(std::lround(acc), 0L, 255L));
      }
    }
  }
  return out;
}

Image resize_and_pad(const Image& src, int32_t width, int32_t height, Rgb fill) {
  VLKV_CHECK(src.valid() && width > 0 && height > 0);
  const double scale = std::min(static_cast<double>(width) / src.width, static_cast<double>(height) / src.height);
  const int32_t new_w = std::clamp(static_cast<int32_t>(std::lround(src.width * scale)), 1, width);
  const int32_t new_h = std::clamp(static_cast<int32_t>(std::lround(src.height * scale)), 1, height);
  const Image scaled = (new_w == src.width && new_h == src.height) ? src : resize_bicubic(src, new_w, new_h);
  Image out = blank(width, height);
  for (size_t i = 0; i < out.pixels.size(); ++i) out.pixels[i] = fill[i % 3];
  const int32_t ox = (width - new_w) / 2;
  const int32_t oy = (height - new_h) / 2;
  for (int32_t y = 0; y < new_h; ++y) {
    std::copy_n(&scaled.pixels[static_cast<size_t>(y) * new_w * 3], static_cast<size_t>(new_w) * 3,
                &out.pixels[(static_cast<size_t>(y + oy) * width + ox) * 3]);
  }
  return out;
}

ImageTensor normalize(const Image& img, const float mean[3], const float std[3]) {
  VLKV_CHECK(img.valid());
  ImageTensor t;
  t.width = img.width;
  t.height = img.height;
  const size_t plane = static_cast<size_t>(img.width) * img.height;
  t.data.resize(3 * plane);
  for (size_t i = 0; i < plane; ++i) {
    for (int c = 0; c < 3; ++c) {
      // As llama.cpp's normalize_image_u8_to_f32: (x / 255 - mean) / std in float.
      t.data[c * plane + i] = (static_cast<float>(img.pixels[i * 3 + c]) / 255.0f - mean[c]) / std[c];
    }
  }
  return t;
}

}  // namespace vlkv
