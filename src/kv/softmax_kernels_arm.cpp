// NEON variant of the softmax helpers (softmax_kernels.h): softmax_kernels_avx2.cpp's exp and
// loops with the same operations in the same order (8 lanes as two 4-lane halves, hsum8's
// order for the sum, the padded tail), so the results are the AVX2 tier's bits.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kv/softmax_kernels.h"

namespace vlkv::attn {
namespace {

struct ExpOps {
  using V = float32x4_t;
  static V splat(float f) { return vdupq_n_f32(f); }
  static V max(V a, V b) { return vmaxq_f32(a, b); }
  static V mul(V a, V b) { return vmulq_f32(a, b); }
  static V add(V a, V b) { return vaddq_f32(a, b); }
  static V round(V a) { return vrndnq_f32(a); }
  static V fmadd(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  static V fnmadd(V a, V b, V c) { return vfmsq_f32(c, a, b); }
  static V scale2n(V y, V n) {  // through the exponent bits
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
  }
};
#include "kv/exp_cephes.inc"
inline float32x4_t exp_neon(float32x4_t x) { return exp_cephes<ExpOps>(x); }

float exp_sub_sum_neon(float* x, int64_t n, float m) {
  const float32x4_t vm = vdupq_n_f32(m);
  float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const float32x4_t e0 = exp_neon(vsubq_f32(vld1q_f32(x + t), vm));
    const float32x4_t e1 = exp_neon(vsubq_f32(vld1q_f32(x + t + 4), vm));
    vst1q_f32(x + t, e0);
    vst1q_f32(x + t + 4, e1);
    lo = vaddq_f32(lo, e0);
    hi = vaddq_f32(hi, e1);
  }
  const float32x4_t s = vaddq_f32(lo, hi);
  const float32x2_t s2 = vadd_f32(vget_low_f32(s), vget_high_f32(s));
  float sum = vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
  if (t < n) {  // tail through the same polynomial (one padded 8-lane vector)
    float tmp[8];
    for (int i = 0; i < 8; ++i) tmp[i] = t + i < n ? x[t + i] : m;
    vst1q_f32(tmp, exp_neon(vsubq_f32(vld1q_f32(tmp), vm)));
    vst1q_f32(tmp + 4, exp_neon(vsubq_f32(vld1q_f32(tmp + 4), vm)));
    for (int64_t i = 0; t + i < n; ++i) sum += (x[t + i] = tmp[i]);
  }
  return sum;
}

float max_neon(const float* x, int64_t n) {
  float32x4_t mx = vdupq_n_f32(x[0]);
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) mx = vmaxq_f32(mx, vld1q_f32(x + t));
  float m = vmaxvq_f32(mx);
  for (; t < n; ++t) m = std::max(m, x[t]);
  return m;
}

}  // namespace

const SoftmaxKernels kSoftmaxKernelsNeon{exp_sub_sum_neon, max_neon};

}  // namespace vlkv::attn
