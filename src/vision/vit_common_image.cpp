#include "vision/vit_common_image.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace vlkv {
namespace {

Image blank(int32_t w, int32_t h) {
  Image img;
  img.width = w;
  img.height = h;
  img.pixels.assign(static_cast<size_t>(w) * h * 3, 0);
  return img;
}

inline const uint8_t* px(const Image& img, int32_t x, int32_t y) {
  return &img.pixels[(static_cast<size_t>(y) * img.width + x) * 3];
}

inline float lerp(float s, float e, float t) { return s + (e - s) * t; }

// libmtmd's bilinear: corner-aligned sampling (x * (src_w-1)/(dst_w-1)), the result
// truncated to uint8.
Image resize_bilinear(const Image& src, int32_t tw, int32_t th) {
  Image dst = blank(tw, th);
  const float x_ratio = tw > 1 ? static_cast<float>(src.width - 1) / static_cast<float>(tw - 1) : 0.0f;
  const float y_ratio = th > 1 ? static_cast<float>(src.height - 1) / static_cast<float>(th - 1) : 0.0f;
  for (int32_t y = 0; y < th; ++y) {
    for (int32_t x = 0; x < tw; ++x) {
      const float fx = static_cast<float>(x) * x_ratio;
      const float fy = static_cast<float>(y) * y_ratio;
      const int32_t x0 = std::min(static_cast<int32_t>(fx), src.width - 1);
      const int32_t y0 = std::min(static_cast<int32_t>(fy), src.height - 1);
      const int32_t x1 = std::min(x0 + 1, src.width - 1);
      const int32_t y1 = std::min(y0 + 1, src.height - 1);
      const float xf = fx - static_cast<float>(x0);
      const float yf = fy - static_cast<float>(y0);
      uint8_t* out = &dst.pixels[(static_cast<size_t>(y) * tw + x) * 3];
      for (int c = 0; c < 3; ++c) {
        const float top = lerp(px(src, x0, y0)[c], px(src, x1, y0)[c], xf);
        const float bottom = lerp(px(src, x0, y1)[c], px(src, x1, y1)[c], xf);
        out[c] = static_cast<uint8_t>(lerp(top, bottom, yf));
      }
    }
  }
  return dst;
}

// libmtmd's bicubic (from ViT.cpp): Catmull-Rom-like cubic through 4x4 neighbours,
// sample point x = j * src_w / dst_w, clamped edges, rounded and clamped to [0, 255].
Image resize_bicubic(const Image& src, int32_t tw, int32_t th) {
  Image dst = blank(tw, th);
  const int32_t nx = src.width, ny = src.height;
  const float tx = static_cast<float>(nx) / static_cast<float>(tw);
  const float ty = static_cast<float>(ny) / static_cast<float>(th);
  auto at = [&](int32_t x, int32_t y, int c) -> float {
    return px(src, std::clamp(x, 0, nx - 1), std::clamp(y, 0, ny - 1))[c];
  };
  for (int32_t i = 0; i < th; ++i) {
    for (int32_t j = 0; j < tw; ++j) {
      const int32_t x = static_cast<int32_t>(tx * static_cast<float>(j));
      const int32_t y = static_cast<int32_t>(ty * static_cast<float>(i));
      const float dx = tx * static_cast<float>(j) - static_cast<float>(x);
      const float dy = ty * static_cast<float>(i) - static_cast<float>(y);
      uint8_t* out = &dst.pixels[(static_cast<size_t>(i) * tw + j) * 3];
      for (int c = 0; c < 3; ++c) {
        float col[4];
        float cc = 0.0f;
        for (int jj = 0; jj < 4; ++jj) {
          const int32_t yy = y - 1 + jj;
          float d0 = at(x - 1, yy, c) - at(x, yy, c);
          float d2 = at(x + 1, yy, c) - at(x, yy, c);
          float d3 = at(x + 2, yy, c) - at(x, yy, c);
          float a0 = at(x, yy, c);
          float a1 = static_cast<float>(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
          float a2 = static_cast<float>(1.0 / 2 * d0 + 1.0 / 2 * d2);
          float a3 = static_cast<float>(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
          col[jj] = a0 + a1 * dx + a2 * dx * dx + a3 * dx * dx * dx;
          // libmtmd evaluates the vertical cubic inside this loop (reading entries of
          // col not yet written in this pixel as zero-initialised/stale); only the
          // value after the last row counts, which is the full 4-row cubic.
        }
        {
          const float d0 = col[0] - col[1];
          const float d2 = col[2] - col[1];
          const float d3 = col[3] - col[1];
          const float a0 = col[1];
          const float a1 = static_cast<float>(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
          const float a2 = static_cast<float>(1.0 / 2 * d0 + 1.0 / 2 * d2);
          const float a3 = static_cast<float>(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
          cc = a0 + a1 * dy + a2 * dy * dy + a3 * dy * dy * dy;
        }
        out[c] = static_cast<uint8_t>(std::min(std::max(std::round(cc), 0.0f), 255.0f));
      }
    }
  }
  return dst;
}

}  // namespace

Image resize_image(const Image& src, int32_t width, int32_t height, ResizeAlgo algo) {
  VLKV_CHECK(src.valid() && width > 0 && height > 0);
  if (src.width == width && src.height == height) return src;
  return algo == ResizeAlgo::kBilinear ? resize_bilinear(src, width, height) : resize_bicubic(src, width, height);
}

Image resize_image_padded(const Image& src, int32_t width, int32_t height, ResizeAlgo algo,
                          std::array<uint8_t, 3> pad_color) {
  VLKV_CHECK(src.valid() && width > 0 && height > 0);
  if (src.width == width && src.height == height) return src;
  const float scale = std::min(static_cast<float>(width) / static_cast<float>(src.width),
                               static_cast<float>(height) / static_cast<float>(src.height));
  const int32_t new_w =
      std::max(1, std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.width) * scale)), width));
  const int32_t new_h =
      std::max(1, std::min(static_cast<int32_t>(std::ceil(static_cast<float>(src.height) * scale)), height));
  const Image resized = resize_image(src, new_w, new_h, algo);
  Image dst = blank(width, height);
  for (size_t i = 0; i < dst.pixels.size(); i += 3) {
    dst.pixels[i] = pad_color[0];
    dst.pixels[i + 1] = pad_color[1];
    dst.pixels[i + 2] = pad_color[2];
  }
  const int32_t off_x = (width - new_w) / 2;
  const int32_t off_y = (height - new_h) / 2;
  for (int32_t y = 0; y < new_h; ++y) {
    std::copy_n(px(resized, 0, y), static_cast<size_t>(new_w) * 3,
                &dst.pixels[(static_cast<size_t>(y + off_y) * width + off_x) * 3]);
  }
  return dst;
}

Image crop_image(const Image& src, int32_t x, int32_t y, int32_t w, int32_t h) {
  VLKV_CHECK(x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= src.width && y + h <= src.height);
  Image dst = blank(w, h);
  for (int32_t r = 0; r < h; ++r) {
    std::copy_n(px(src, x, y + r), static_cast<size_t>(w) * 3, &dst.pixels[static_cast<size_t>(r) * w * 3]);
  }
  return dst;
}

ImageTensor normalize_image(const Image& src, const float mean[3], const float std[3]) {
  VLKV_CHECK(src.valid());
  ImageTensor t;
  t.width = src.width;
  t.height = src.height;
  const size_t plane = static_cast<size_t>(src.width) * src.height;
  t.data.resize(plane * 3);
  for (size_t i = 0; i < plane; ++i) {
    for (int c = 0; c < 3; ++c) {
      // As clip_image_f32: pixel / 255.0f first, then (v - mean) / std.
      const float v = static_cast<float>(src.pixels[i * 3 + c]) / 255.0f;
      t.data[c * plane + i] = (v - mean[c]) / std[c];
    }
  }
  return t;
}

}  // namespace vlkv
