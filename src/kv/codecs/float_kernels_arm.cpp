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

namespace vlkv::float_kernels {
namespace {

template <class Elem>
inline float32x4_t load4(const Elem* x) {
  if constexpr (std::is_same_v<Elem, float>) return vld1q_f32(x);
  else return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x)));
}

// RB (1 or 2) query rows x 4 keys per pass: 8 lanes per (row, key) in two accumulators.
template <class Elem, int RB>
void scores_rows(const float* q, int d, const Elem* rows, int64_t n, float scale, float* lr, int64_t ld) {
  const float32x4_t vscale = vdupq_n_f32(scale);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const Elem* k0 = rows + j * d;
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
      vst1q_f32(lr + b * ld + j, vmulq_f32(sums, vscale));
    }
  }
  for (; j < n; ++j) {  // the AVX2 tail: one 8-lane accumulator, hsum8's order
    const Elem* k0 = rows + j * d;
    for (int b = 0; b < RB; ++b) {
      float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
      for (int i = 0; i < d; i += 8) {
        lo = vfmaq_f32(lo, vld1q_f32(q + b * d + i), load4(k0 + i));
        hi = vfmaq_f32(hi, vld1q_f32(q + b * d + i + 4), load4(k0 + i + 4));
      }
      const float32x4_t s = vaddq_f32(lo, hi);
      const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
      lr[b * ld + j] = (vget_lane_f32(t, 0) + vget_lane_f32(t, 1)) * scale;
    }
  }
}

template <class Elem>
void scores_neon(const float* q, int n_q, const SegmentView& s, float scale, float* logits, int64_t ld) {
  const int d = s.head_dim;
  if (d % 8 != 0) return scores_scalar<Elem>(q, n_q, s, scale, logits, ld);
  for (int64_t t0 = 0; t0 < s.n_tokens;) {
    const int64_t n = s.contiguous_blocks(t0);
    const Elem* rows = reinterpret_cast<const Elem*>(s.block(t0));
    for (int r0 = 0; r0 < n_q; r0 += 2) {
      const float* qr = q + static_cast<int64_t>(r0) * d;
      if (n_q - r0 >= 2) scores_rows<Elem, 2>(qr, d, rows, n, scale, logits + r0 * ld + t0, ld);
      else scores_rows<Elem, 1>(qr, d, rows, n, scale, logits + r0 * ld + t0, ld);
    }
    t0 += n;
  }
}

// RB rows x 16 channels (4 vectors) in registers over n tokens; the last 8 channels of a
// head that is not a multiple of 16 as 2 vectors.
template <class Elem, int RB, int CV>
inline void accumulate_block(const float* p, int64_t ld, const Elem* rows, int64_t n, int d, int c0, float* out) {
  float32x4_t acc[RB][CV];
  for (int r = 0; r < RB; ++r)
    for (int c = 0; c < CV; ++c) acc[r][c] = vld1q_f32(out + r * d + c0 + 4 * c);
  for (int64_t j = 0; j < n; ++j) {
    const Elem* v = rows + j * d + c0;
    float32x4_t vv[CV];
    for (int c = 0; c < CV; ++c) vv[c] = load4(v + 4 * c);
    for (int r = 0; r < RB; ++r) {
      const float32x4_t w = vld1q_dup_f32(p + r * ld + j);
      for (int c = 0; c < CV; ++c) acc[r][c] = vfmaq_f32(acc[r][c], w, vv[c]);
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int c = 0; c < CV; ++c) vst1q_f32(out + r * d + c0 + 4 * c, acc[r][c]);
}

template <class Elem, int RB>
void accumulate_rows(const float* p, int64_t ld, const Elem* rows, int64_t n, int d, float* out) {
  int c0 = 0;
  for (; c0 + 16 <= d; c0 += 16) accumulate_block<Elem, RB, 4>(p, ld, rows, n, d, c0, out);
  if (c0 < d) accumulate_block<Elem, RB, 2>(p, ld, rows, n, d, c0, out);
}

template <class Elem>
void accumulate_neon(const float* p, int64_t ld, int n_q, const SegmentView& s, float* out) {
  const int d = s.head_dim;
  if (d % 8 != 0) return accumulate_scalar<Elem>(p, ld, n_q, s, out);
  constexpr int64_t kSub = 64;  // tokens per pass: the rows stay in L1 across the query rows
  for (int64_t t0 = 0; t0 < s.n_tokens;) {
    const int64_t n_run = s.contiguous_blocks(t0);
    const Elem* run = reinterpret_cast<const Elem*>(s.block(t0));
    for (int64_t j0 = 0; j0 < n_run; j0 += kSub) {
      const int64_t n = std::min(kSub, n_run - j0);
      const Elem* rows = run + j0 * d;
      for (int r0 = 0; r0 < n_q; r0 += 4) {
        const float* pr = p + r0 * ld + t0 + j0;
        float* o = out + static_cast<int64_t>(r0) * d;
        switch (std::min(4, n_q - r0)) {
          case 4: accumulate_rows<Elem, 4>(pr, ld, rows, n, d, o); break;
          case 3: accumulate_rows<Elem, 3>(pr, ld, rows, n, d, o); break;
          case 2: accumulate_rows<Elem, 2>(pr, ld, rows, n, d, o); break;
          default: accumulate_rows<Elem, 1>(pr, ld, rows, n, d, o); break;
        }
      }
    }
    t0 += n_run;
  }
}

}  // namespace

const FloatKernels kFloatKernelsNeon{scores_neon<float>, scores_neon<uint16_t>, accumulate_neon<float>,
                                     accumulate_neon<uint16_t>};

}  // namespace vlkv::float_kernels
