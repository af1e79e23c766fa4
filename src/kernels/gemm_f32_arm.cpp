// NEON micro-kernels of the exact f32 prefill GEMM (gemm_f32.h): gemm_f32_x86.cpp's AVX2 kernels
// with the same operations in the same order, so the results are the x86 SIMD tiers' bits.
//  - GEMM: a 6 x 16 tile (24 accumulators + 4 weight vectors + 1 broadcast of the 32 q
//    registers); every y element is the fused chain fma(x_k, w_k, acc) over k in order, as at
//    AVX2 and AVX-512 (the scalar reference rounds each product: -ffp-contract=off on ARM64).
//  - exp_sum: exp_avx2's formula (x = s * scale - shift fused, as GCC contracts it on x86),
//    8 lanes as two 4-lane halves, hsum256's order for the sum, the tail through a padded vector.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>

#include "base/simd_dispatch.h"
#include "kernels/exp_poly.h"
#include "kernels/gemm_f32.h"

namespace vlkv {
namespace {

constexpr int kNeonMr = 6, kNeonNr = 16;

template <int M>
void gemm_neon(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  float32x4_t acc[M][4];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
    for (int h = 0; h < 4; ++h) acc[i][h] = accumulate ? vld1q_f32(c + i * ldc + 4 * h) : vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kNeonNr;
    const float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4), b2 = vld1q_f32(bk + 8), b3 = vld1q_f32(bk + 12);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const float32x4_t av = vld1q_dup_f32(a + i * lda + k);
      acc[i][0] = vfmaq_f32(acc[i][0], av, b0);
      acc[i][1] = vfmaq_f32(acc[i][1], av, b1);
      acc[i][2] = vfmaq_f32(acc[i][2], av, b2);
      acc[i][3] = vfmaq_f32(acc[i][3], av, b3);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
    for (int h = 0; h < 4; ++h) vst1q_f32(c + i * ldc + 4 * h, acc[i][h]);
}

// exp_avx2 on 4 lanes, operation for operation.
inline float32x4_t exp_neon(float32x4_t s, float32x4_t scale, float32x4_t neg_shift) {
  using namespace exp_poly;
  float32x4_t x = vfmaq_f32(neg_shift, s, scale);
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(kMin)), vdupq_n_f32(kMax));
  const float32x4_t fx = vrndmq_f32(vfmaq_f32(vdupq_n_f32(0.5f), x, vdupq_n_f32(kLog2e)));
  float32x4_t r = vfmsq_f32(x, fx, vdupq_n_f32(kLn2Hi));
  r = vfmsq_f32(r, fx, vdupq_n_f32(kLn2Lo));
  float32x4_t p = vfmaq_f32(vdupq_n_f32(kP1), vdupq_n_f32(kP0), r);
  p = vfmaq_f32(vdupq_n_f32(kP2), p, r);
  p = vfmaq_f32(vdupq_n_f32(kP3), p, r);
  p = vfmaq_f32(vdupq_n_f32(kP4), p, r);
  p = vfmaq_f32(vdupq_n_f32(kP5), p, r);
  const float32x4_t e = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
  const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(fx), vdupq_n_s32(127)), 23);
  return vmulq_f32(e, vreinterpretq_f32_s32(bits));
}

float row_max_neon(const float* s, int64_t n) {
  float32x4_t m = vdupq_n_f32(-INFINITY);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) m = vmaxq_f32(m, vld1q_f32(s + i));
  float r = vmaxvq_f32(m);
  for (; i < n; ++i) r = s[i] > r ? s[i] : r;
  return r;
}

float exp_sum_neon(float* s, int64_t n, float scale, float shift) {
  const float32x4_t vs = vdupq_n_f32(scale), vh = vdupq_n_f32(-shift);
  float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t e0 = exp_neon(vld1q_f32(s + i), vs, vh), e1 = exp_neon(vld1q_f32(s + i + 4), vs, vh);
    vst1q_f32(s + i, e0);
    vst1q_f32(s + i + 4, e1);
    lo = vaddq_f32(lo, e0);
    hi = vaddq_f32(hi, e1);
  }
  // hsum256: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
  const float32x4_t pairs = vpaddq_f32(lo, hi);  // l0+l1, l2+l3, l4+l5, l6+l7
  float total = (vgetq_lane_f32(pairs, 0) + vgetq_lane_f32(pairs, 1)) +
                (vgetq_lane_f32(pairs, 2) + vgetq_lane_f32(pairs, 3));
  if (i < n) {  // the tail through a zero-padded vector; its padding lanes are not summed
    float t[8] = {};
    const int rest = static_cast<int>(n - i);
    std::copy_n(s + i, rest, t);
    vst1q_f32(t, exp_neon(vld1q_f32(t), vs, vh));
    vst1q_f32(t + 4, exp_neon(vld1q_f32(t + 4), vs, vh));
    for (int j = 0; j < rest; ++j) {
      s[i + j] = t[j];
      total += t[j];
    }
  }
  return total;
}

template <int M> struct NeonK { static constexpr GemmF32Fn fn = &gemm_neon<M>; };

}  // namespace

const GemmF32Kernels kGemmF32Neon = make_gemm_f32_table<kNeonMr, kNeonNr, NeonK>(&row_max_neon, &exp_sum_neon);

}  // namespace vlkv
