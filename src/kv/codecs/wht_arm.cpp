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

struct VecOps {
  using V = float32x4_t;
  static constexpr int kLanes = 4;
  static V load(const float* x) { return vld1q_f32(x); }
  static void store(float* x, V v) { vst1q_f32(x, v); }
  static V add(V a, V b) { return vaddq_f32(a, b); }
  static V sub(V a, V b) { return vsubq_f32(a, b); }
  static V mul(V a, V b) { return vmulq_f32(a, b); }
  static V splat(float f) { return vdupq_n_f32(f); }
  static V butterflies(V x) { return butterflies4(x); }
};

#include "kv/codecs/wht_loops.inc"

}  // namespace

const WhtKernels kWhtKernelsNeon{wht_rows_simd};

}  // namespace vlkv
