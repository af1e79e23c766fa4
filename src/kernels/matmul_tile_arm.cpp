// NEON f32 micro-kernels for prefill matmul (matmul_tile.h), instantiated for every tile
// shape up to 4 rows x 4 tokens (16 accumulators + 4 weight rows + 1 token of the 32
// vector registers).
#include <arm_neon.h>

#include "kernels/matmul_tile.h"

namespace vlkv {
namespace {

template <int R, int T>
void tile_neon(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k, float* y, int64_t ldy) {
  float32x4_t acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 <= k; i += 4) {
    float32x4_t wv[R];
    for (int r = 0; r < R; ++r) wv[r] = vld1q_f32(w + r * ldw + i);
    for (int t = 0; t < T; ++t) {
      const float32x4_t xv = vld1q_f32(x + t * ldx + i);
      for (int r = 0; r < R; ++r) acc[r][t] = vfmaq_f32(acc[r][t], wv[r], xv);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float sum = vaddvq_f32(acc[r][t]);
      for (int64_t j = i; j < k; ++j) sum += w[r * ldw + j] * x[t * ldx + j];
      y[t * ldy + r] += sum;
    }
}

template <int R, int T> struct NeonK { static constexpr TileFn fn = &tile_neon<R, T>; };

}  // namespace

const TileKernels kTileKernelsNeon = make_tile_table<4, 4, NeonK>();

}  // namespace vlkv
