// RGB8 images inside the library: the public vlkv::Image (include/vlkv/media.h)
// plus the f32 tensor a vision encoder receives after preprocessing.
#pragma once

#include <cstdint>
#include <vector>

#include "vlkv/media.h"

namespace vlkv {

// A normalised image as a ViT takes it: (pixel/255 - mean[c]) / std[c].
struct ImageTensor {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<float> data;  // [3, height, width] channel-planar (the layout of the fixtures' preproc.f32)
};

}  // namespace vlkv
