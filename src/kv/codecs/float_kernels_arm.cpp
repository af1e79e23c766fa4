// NEON variant of the f32 / f16 fused kernels (float_kernels.h), ported from the AVX2 variant's
// blocked kernels with the same float operations in the same order, so the results are the
// AVX2 tier's bits: scores sum 8 lanes (two 4-lane halves) per key in an fma chain over the
// head and reduce them in reduce_8's order (((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)):
// three pairwise adds, which also gather four keys' totals into one vector); accumulate is one
// fma chain per output in token order, as every SIMD tier. f16 rows widen with fcvtl (exact).
// Head dims that are not a multiple of 8 take the scalar reference.
#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kv/codec.h"
#include "kv/codecs/float_kernels.h"
#include "kv/codecs/view_prefetch.h"

namespace vlkv::float_kernels {
namespace {

template <class Elem>
inline float32x4_t load4(const Elem* x) {
  if constexpr (std::is_same_v<Elem, float>) return vld1q_f32(x);
  else return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x)));
}

// RB (1 or 2) query rows x keys k0 .. k0 + 3 d: 8 lanes per (row, key) in two accumulators.
template <class Elem, int RB>
void scores_4keys(const float* q, int d, const Elem* k0, float scale, float* lr, int64_t ld) {
  float32x4_t lo[RB][4], hi[RB][4];
  for (int b = 0; b < RB; ++b)
    for (int a = 0; a < 4; ++a) lo[b][a] = hi[b][a] = vdupq_n_f32(0.0f);
  for (int i = 0; i < d; i += 8) {
    float32x4_t kl[4], kh[4];
    for (int a = 0; a < 4; ++a) {
      kl[a] = load4(k0 + a * d + i);
      kh[a] = load4(k0 + a * d + i + 4);
    }
    for (int b = 0; b < RB; ++b) {
      const float32x4_t ql = vld1q_f32(q + b * d + i), qh = vld1q_f32(q + b * d + i + 4);
      for (int a = 0; a < 4; ++a) {
        lo[b][a] = vfmaq_f32(lo[b][a], ql, kl[a]);
        hi[b][a] = vfmaq_f32(hi[b][a], qh, kh[a]);
      }
    }
  }
  for (int b = 0; b < RB; ++b) {
    // Four keys at once: pairs, then pairs of pairs, then halves (reduce_8's tree).
    const float32x4_t p0 = vpaddq_f32(lo[b][0], hi[b][0]), p1 = vpaddq_f32(lo[b][1], hi[b][1]);
    const float32x4_t p2 = vpaddq_f32(lo[b][2], hi[b][2]), p3 = vpaddq_f32(lo[b][3], hi[b][3]);
    const float32x4_t q01 = vpaddq_f32(p0, p1), q23 = vpaddq_f32(p2, p3);  // [k0 lo, k0 hi, k1 lo, k1 hi]
    const float32x4_t sums = vpaddq_f32(q01, q23);
    vst1q_f32(lr + b * ld, vmulq_f32(sums, vdupq_n_f32(scale)));
  }
}

template <class Elem>
void scores_fallback(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
  scores_scalar<Elem>(q, n_q, s, scale, logits, ld);
}
template <class Elem>
void accumulate_fallback(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  accumulate_scalar<Elem>(p, ld, n_q, s, out);
}

struct VecOps {
  using V = float32x4_t;
  static constexpr int kLanes = 4, kMaxVecs = 4, kScoreRows = 2, kDimMultiple = 8;
  template <class Elem>
  static V load(const Elem* x) { return load4(x); }
  static V loadf(const float* x) { return vld1q_f32(x); }
  static void storef(float* x, V v) { vst1q_f32(x, v); }
  static V splat(const float* x) { return vld1q_dup_f32(x); }
  static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  // q . k over d (a multiple of 8) as the AVX2 tier: one 8-lane chain (two halves), hsum8's order.
  template <class Elem>
  static float dot(const float* q, const Elem* k, int d) {
    V lo = vdupq_n_f32(0.0f), hi = lo;
    for (int i = 0; i < d; i += 8) {
      lo = vfmaq_f32(lo, vld1q_f32(q + i), load4(k + i));
      hi = vfmaq_f32(hi, vld1q_f32(q + i + 4), load4(k + i + 4));
    }
    const float32x4_t s = vaddq_f32(lo, hi);
    const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
  }
};

#include "kv/codecs/float_kernel_loops.inc"

}  // namespace

const FloatKernels kFloatKernelsNeon = float_kernel_table();

}  // namespace vlkv::float_kernels
