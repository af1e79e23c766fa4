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

// Cephes-style expf as exp_avx2: n = round(x log2 e), r = x - n ln 2 (two-part), degree-6
// polynomial on |r| <= ln2/2, times 2^n. Relative error ~2 ulp; x below -87 flushes to ~0.
inline float32x4_t exp_neon(float32x4_t x) {
  x = vmaxq_f32(x, vdupq_n_f32(-87.0f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t y = vdupq_n_f32(1.9875691500e-4f);
  y = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), y, r);
  y = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), y, r);
  y = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), y, r);
  y = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), y, r);
  y = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), y, r);
  y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), y, vmulq_f32(r, r));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

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
