// Pixel operations of the preprocessors: resize, pad, normalise. RGB8 in,
// RGB8 or f32 out. Resize rules follow llama.cpp's clip preprocessing.
#pragma once

#include <array>
#include <cstdint>

#include "vision/image.h"

namespace vlkv {

using Rgb = std::array<uint8_t, 3>;

// Bilinear resize to width x height (pixel centres aligned, edge clamped).
Image resize_bilinear(const Image& src, int32_t width, int32_t height);
// Bicubic resize (Catmull-Rom-style kernel a = -0.5, edge clamped, rounded and clamped to 0..255).
Image resize_bicubic(const Image& src, int32_t width, int32_t height);

// Fits src inside width x height keeping its aspect ratio (bicubic when the size
// changes, a copy when it does not), centred on a fill-colour canvas.
Image resize_and_pad(const Image& src, int32_t width, int32_t height, Rgb fill);

// (pixel/255 - mean[c]) / std[c], to the planar [3, height, width] layout.
ImageTensor normalize(const Image& img, const float mean[3], const float std[3]);

}  // namespace vlkv
