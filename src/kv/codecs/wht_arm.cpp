// NEON variant of the Walsh-Hadamard transform (wht_kernels.h): the butterflies of wht() in
// the same order on 4 lanes (strides 1 and 2 inside a vector by rev64 / ext + select, strides
// >= 4 between vectors), so every output is bit-identical to the scalar reference.
#include <arm_neon.h>

#include <cmath>
#include <cstdint>

#include "kv/codecs/wht.h"
#include "kv/codecs/wht_kernels.h"

namespace vlkv {
namespace {

// One vector's butterflies of stride 1 and 2: lane j pairs with j ^ h; the lower lane keeps
// a + b, the upper a - b (from the upper lane: partner - self).
inline float32x4_t butterflies4(float32x4_t x) {
  const uint32x4_t upper1 = {0, ~0u, 0, ~0u}, upper2 = {0, 0, ~0u, ~0u};
  float32x4_t y = vrev64q_f32(x);  // swap neighbours
  x = vbslq_f32(upper1, vsubq_f32(y, x), vaddq_f32(x, y));
  y = vextq_f32(x, x, 2);  // swap pairs
  return vbslq_f32(upper2, vsubq_f32(y, x), vaddq_f32(x, y));
}

void wht_row(float* x, int d) {
  for (int i = 0; i < d; i += 4) vst1q_f32(x + i, butterflies4(vld1q_f32(x + i)));
  for (int h = 4; h < d; h *= 2)
    for (int i = 0; i < d; i += 2 * h)
      for (int j = i; j < i + h; j += 4) {
        const float32x4_t a = vld1q_f32(x + j), b = vld1q_f32(x + j + h);
        vst1q_f32(x + j, vaddq_f32(a, b));
        vst1q_f32(x + j + h, vsubq_f32(a, b));
      }
  const float32x4_t s = vdupq_n_f32(1.0f / std::sqrt(static_cast<float>(d)));
  for (int i = 0; i < d; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), s));
}

void wht_rows_neon(float* x, int64_t n, int d) {
  if (d < 4) {  // below one vector: the scalar reference
    for (int64_t r = 0; r < n; ++r) wht(x + r * d, d);
    return;
  }
  for (int64_t r = 0; r < n; ++r) wht_row(x + r * d, d);
}

}  // namespace

const WhtKernels kWhtKernelsNeon{wht_rows_neon};

}  // namespace vlkv
