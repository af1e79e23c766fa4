// Pixel operations the ViT preprocessors share: llama.cpp's resizes (bilinear,
// bicubic, aspect-preserving fit with padding), crops, and normalisation to the
// f32 tensor a ViT takes. Each follows libmtmd's arithmetic step by step, so the
// tensors equal llama.cpp's (the fixtures' preproc.f32) to float rounding.
#pragma once

#include <array>
#include <cstdint>

#include "vision/image.h"

namespace vlkv {

enum class ResizeAlgo { kBilinear, kBicubic };

// Direct resize to width x height (aspect ratio not kept). A same-size resize copies.
Image resize_image(const Image& src, int32_t width, int32_t height, ResizeAlgo algo);

// Aspect-preserving fit into width x height: scale = min(w/src_w, h/src_h), the
// resized size rounded up (capped at the target), centred on a pad_color canvas.
Image resize_image_padded(const Image& src, int32_t width, int32_t height, ResizeAlgo algo,
                          std::array<uint8_t, 3> pad_color = {0, 0, 0});

// The w x h rectangle at (x, y); it must lie inside src.
Image crop_image(const Image& src, int32_t x, int32_t y, int32_t w, int32_t h);

// (pixel/255 - mean[c]) / std[c], channel-planar [3, height, width].
ImageTensor normalize_image(const Image& src, const float mean[3], const float std[3]);

}  // namespace vlkv
