// AVX-512 F/BW/DQ/VL variant of the f32 / f16 fused kernels (float_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "base/simd_dispatch.h"
#include "kv/codec.h"
#include "kv/codecs/float_hsum_x86.h"
#include "kv/codecs/float_kernels.h"
#include "kv/codecs/view_prefetch.h"

// GCC 12's AVX-512 headers seed intrinsics with _mm512_undefined_*(), which trips
// -Wmaybe-uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512)
namespace vlkv::float_kernels {
namespace {

// ---------------- AVX-512 F/BW/DQ/VL ----------------

template <class Elem>
inline __m512 load16(const Elem* x, __mmask16 m) {
  if constexpr (std::is_same_v<Elem, float>) return _mm512_maskz_loadu_ps(m, x);
  else return _mm512_maskz_cvtph_ps(m, _mm256_maskz_loadu_epi16(m, x));
}


// ---------------- blocked kernels (head_dim a multiple of the vector width) ----------------
// Decode attention reads a whole GQA group of query rows (typically 4) per pass over
// the cache, so the kernels below load (and convert) each key/value vector once and
// feed it to every row of a block of up to 4 rows from registers:
//  - scores: 4 keys x 4 rows of 16-wide partial dot products (16 zmm accumulators),
//    reduced to 16 logits by one transpose-add tree (45 ops for 16 dots);
//  - accumulate: 4 rows x up to 64 channels of output in registers across a sub-block
//    of 64 tokens (which stays in L1), so out is loaded/stored once per sub-block.

// 16 vectors v[0..15] -> one vector whose element 4*j + i is the sum of v[4*i + j].
inline __m512 reduce_4x4(const __m512* v) {
  __m512 u[8], w[4];
  for (int k = 0; k < 8; ++k)
    u[k] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xffff, v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_maskz_shuffle_f32x4(0xffff, v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int m = 0; m < 4; ++m)
    w[m] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(0xffff, u[2 * m], u[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_maskz_shuffle_f32x4(0xffff, u[2 * m], u[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 p = _mm512_add_ps(_mm512_maskz_unpacklo_ps(0xffff, w[0], w[1]), _mm512_maskz_unpackhi_ps(0xffff, w[0], w[1]));
  const __m512 q = _mm512_add_ps(_mm512_maskz_unpacklo_ps(0xffff, w[2], w[3]), _mm512_maskz_unpackhi_ps(0xffff, w[2], w[3]));
  const __m512d pd = _mm512_castps_pd(p), qd = _mm512_castps_pd(q);
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_maskz_unpacklo_pd(0xff, pd, qd)), _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(0xff, pd, qd)));
}

// Rows [0, RB) of q against keys k0 .. k0 + 3 d (each [d], d % 16 == 0): lr[r * ld + a] = scale * q_r . k_a.
template <class Elem, int RB>
void scores_4keys(const float* q, int d, const Elem* k0, float scale, float* lr, int64_t ld) {
  __m512 acc[16];
  for (int x = 0; x < 16; ++x) acc[x] = _mm512_setzero_ps();
  for (int i = 0; i < d; i += 16) {
    const __m512 ka[4] = {load16(k0 + i, 0xffff), load16(k0 + d + i, 0xffff), load16(k0 + 2 * d + i, 0xffff),
                          load16(k0 + 3 * d + i, 0xffff)};
    for (int b = 0; b < RB; ++b) {
      const __m512 qv = _mm512_loadu_ps(q + b * d + i);
      for (int a = 0; a < 4; ++a) acc[4 * a + b] = _mm512_fmadd_ps(qv, ka[a], acc[4 * a + b]);
    }
  }
  const __m512 sums = _mm512_mul_ps(reduce_4x4(acc), _mm512_set1_ps(scale));  // element 4*row + key
  if constexpr (RB >= 1) _mm_storeu_ps(lr, _mm512_maskz_extractf32x4_ps(0xf, sums, 0));
  if constexpr (RB >= 2) _mm_storeu_ps(lr + ld, _mm512_maskz_extractf32x4_ps(0xf, sums, 1));
  if constexpr (RB >= 3) _mm_storeu_ps(lr + 2 * ld, _mm512_maskz_extractf32x4_ps(0xf, sums, 2));
  if constexpr (RB >= 4) _mm_storeu_ps(lr + 3 * ld, _mm512_maskz_extractf32x4_ps(0xf, sums, 3));
}

struct VecOps {
  using V = __m512;
  static constexpr int kLanes = 16, kMaxVecs = 4, kScoreRows = 4, kDimMultiple = 16;
  template <class Elem>
  static V load(const Elem* x) { return load16(x, 0xffff); }
  static V loadf(const float* x) { return _mm512_loadu_ps(x); }
  static void storef(float* x, V v) { _mm512_storeu_ps(x, v); }
  static V splat(const float* x) { return _mm512_set1_ps(*x); }
  static V zero() { return _mm512_setzero_ps(); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  // q . k over d (a multiple of 16) in one 16-lane chain.
  template <class Elem>
  static float dot(const float* q, const Elem* k, int d) {
    V a = zero();
    for (int i = 0; i < d; i += 16) a = fma(loadf(q + i), load<Elem>(k + i), a);
    return hsum16(a);
  }
  // The fallbacks' tails: the last d - i (< 16) elements as one masked step.
  static __mmask16 tail_mask(int i, int d) { return static_cast<__mmask16>((1u << (d - i)) - 1); }
  template <class Elem>
  static float finish_dot(V acc, const float* q, const Elem* k, int i, int d) {
    if (i < d) acc = fma(_mm512_maskz_loadu_ps(tail_mask(i, d), q + i), load16(k + i, tail_mask(i, d)), acc);
    return hsum16(acc);
  }
  template <int N, class Elem>
  static void axpy_tail(const float* w, const Elem* const* v, int i, int d, float* o) {
    if (i >= d) return;
    const __mmask16 m = tail_mask(i, d);
    V acc = _mm512_maskz_loadu_ps(m, o + i);
    for (int x = 0; x < N; ++x) acc = fma(splat(w + x), load16(v[x] + i, m), acc);
    _mm512_mask_storeu_ps(o + i, m, acc);
  }
};

#include "kv/codecs/float_fallback_x86.inc"
#include "kv/codecs/float_kernel_loops.inc"

}  // namespace

const FloatKernels kFloatKernelsAvx512 = float_kernel_table();

}  // namespace vlkv::float_kernels
VLKV_TARGET_END
