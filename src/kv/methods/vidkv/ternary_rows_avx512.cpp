// AVX-512 kernels of the ternary codec's row-ordered blocks (ternary_rows_avx2.cpp says
// which blocks): f32 math over the unpacked int8 codes, tails masked.
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/codecs/float_hsum_x86.h"
#include "kv/codecs/float_kernels.h"
#include "kv/methods/vidkv/ternary_tiles.h"

namespace vlkv::ternt {
namespace {

#define VLKV_T_AVX512 VLKV_TARGET(VLKV_ISA_AVX512)

// int8 codes -> floats. (maskz forms: GCC 12's unmasked ones trip -Wmaybe-uninitialized.)
VLKV_T_AVX512 inline __m512 cvt16_(__m128i c) {
  return _mm512_maskz_cvtepi32_ps(0xffff, _mm512_maskz_cvtepi8_epi32(0xffff, c));
}

}  // namespace

VLKV_T_AVX512 void row_scores_avx512(const float* qs, const int8_t* codes, int G, int d, float scale, float* lr) {
  for (int t = 0; t < G; ++t) {
    const int8_t* c = codes + static_cast<int64_t>(t) * d;
    __m512 a = _mm512_setzero_ps();
    for (int i = 0; i < d; i += 16) {
      const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - i)) - 1);
      const __m512 cv = cvt16_(_mm_maskz_loadu_epi8(m, c + i));
      a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qs + i), cv, a);
    }
    lr[t] = float_kernels::hsum16(a) * scale;
  }
}

VLKV_T_AVX512 void row_accum_avx512(const float* p, const int8_t* codes, int G, int d, const float* sig, float* o) {
  for (int i = 0; i < d; i += 16) {
    const __mmask16 m = d - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (d - i)) - 1);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int t = 0;
    for (; t + 2 <= G; t += 2) {
      const int8_t* c = codes + static_cast<int64_t>(t) * d + i;
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[t]), cvt16_(_mm_maskz_loadu_epi8(m, c)), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(p[t + 1]), cvt16_(_mm_maskz_loadu_epi8(m, c + d)), a1);
    }
    if (t < G)
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[t]),
                           cvt16_(_mm_maskz_loadu_epi8(m, codes + static_cast<int64_t>(t) * d + i)), a0);
    const __m512 acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, sig + i), _mm512_add_ps(a0, a1), _mm512_maskz_loadu_ps(m, o + i));
    _mm512_mask_storeu_ps(o + i, m, acc);
  }
}

#undef VLKV_T_AVX512

}  // namespace vlkv::ternt
