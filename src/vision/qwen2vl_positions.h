// M-RoPE positions of Qwen2-VL's visual tokens in the text decoder (HF get_rope_index,
// libmtmd's mrope 2D positions): a run laid out on [grid_t, grid_h, grid_w] (merged
// tokens) starting at text position p gets (t, h, w) = (p + T(ti), p + yi, p + xi), and the
// text after it continues at p + max(T(grid_t - 1) + 1, grid_h, grid_w) — not p + n_tokens.
// T(ti) = floor(ti * t_step): t_step is 1 for images and Qwen2-VL video, and
// second_per_grid_t * tokens_per_second for Qwen2.5-VL video (see video_t_step in
// vision_model.h).
#pragma once

#include <cstdint>
#include <vector>

namespace vlkv {

// Temporal index of temporal patch ti: floor(ti * t_step) (t_step > 0).
int64_t qwen2vl_temporal_index(int32_t ti, double t_step);

// [grid_t * grid_h * grid_w, 3] (t, h, w) per token, tokens row-major over (t, y, x).
std::vector<int64_t> qwen2vl_visual_positions(int64_t pos_start, int32_t grid_t, int32_t grid_h, int32_t grid_w,
                                              double t_step = 1.0);

// How far the run advances the text position: max(T(grid_t - 1) + 1, grid_h, grid_w).
int64_t qwen2vl_visual_n_pos(int32_t grid_t, int32_t grid_h, int32_t grid_w, double t_step = 1.0);

// [n, 3] (p, p, p) for text tokens at positions pos_start .. pos_start + n - 1.
std::vector<int64_t> qwen2vl_text_positions(int64_t pos_start, int64_t n);

}  // namespace vlkv
