#include "vision/qwen2vl_positions.h"

#include <algorithm>

namespace vlkv {

std::vector<int64_t> qwen2vl_visual_positions(int64_t pos_start, int32_t grid_t, int32_t grid_h, int32_t grid_w) {
  std::vector<int64_t> pos;
  pos.reserve(static_cast<size_t>(grid_t) * grid_h * grid_w * 3);
  for (int32_t t = 0; t < grid_t; ++t) {
    for (int32_t y = 0; y < grid_h; ++y) {
      for (int32_t x = 0; x < grid_w; ++x) {
        pos.push_back(pos_start + t);
        pos.push_back(pos_start + y);
        pos.push_back(pos_start + x);
      }
    }
  }
  return pos;
}

int64_t qwen2vl_visual_n_pos(int32_t grid_t, int32_t grid_h, int32_t grid_w) {
  return std::max({grid_t, grid_h, grid_w});
}

std::vector<int64_t> qwen2vl_text_positions(int64_t pos_start, int64_t n) {
  std::vector<int64_t> pos(static_cast<size_t>(n) * 3);
  for (int64_t i = 0; i < n; ++i) pos[i * 3] = pos[i * 3 + 1] = pos[i * 3 + 2] = pos_start + i;
  return pos;
}

}  // namespace vlkv
