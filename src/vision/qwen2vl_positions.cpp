#include "vision/qwen2vl_positions.h"

#include <algorithm>
#include <cmath>

namespace vlkv {

int64_t qwen2vl_temporal_index(int32_t ti, double t_step) {
  // The product is truncated, not the step: a 0.5 s step at 2 tokens/s gives 0, 1, 2, ...
  // (transformers' Qwen2_5_VLModel.get_rope_index: (arange(t) * second_per_grid_t *
  // tokens_per_second).long(); huggingface/transformers#48669 stopped truncating the step).
  // The epsilon keeps 3 * (2/3 * 1.5) from landing on 2.999...
  return static_cast<int64_t>(std::floor(static_cast<double>(ti) * t_step + 1e-9));
}

std::vector<int64_t> qwen2vl_visual_positions(int64_t pos_start, int32_t grid_t, int32_t grid_h, int32_t grid_w,
                                              double t_step) {
  std::vector<int64_t> pos;
  pos.reserve(static_cast<size_t>(grid_t) * grid_h * grid_w * 3);
  for (int32_t t = 0; t < grid_t; ++t) {
    const int64_t pt = pos_start + qwen2vl_temporal_index(t, t_step);
    for (int32_t y = 0; y < grid_h; ++y) {
      for (int32_t x = 0; x < grid_w; ++x) {
        pos.push_back(pt);
        pos.push_back(pos_start + y);
        pos.push_back(pos_start + x);
      }
    }
  }
  return pos;
}

int64_t qwen2vl_visual_n_pos(int32_t grid_t, int32_t grid_h, int32_t grid_w, double t_step) {
  const int64_t t_span = grid_t > 0 ? qwen2vl_temporal_index(grid_t - 1, t_step) + 1 : 0;
  return std::max({t_span, static_cast<int64_t>(grid_h), static_cast<int64_t>(grid_w)});
}

std::vector<int64_t> qwen2vl_text_positions(int64_t pos_start, int64_t n) {
  std::vector<int64_t> pos(static_cast<size_t>(n) * 3);
  for (int64_t i = 0; i < n; ++i) pos[i * 3] = pos[i * 3 + 1] = pos[i * 3 + 2] = pos_start + i;
  return pos;
}

}  // namespace vlkv
