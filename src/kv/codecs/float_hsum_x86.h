// Horizontal sums of f32 vectors, shared by the codecs' x86 kernel files (float, ternary,
// integer tiles). x86 only: included by *_avx2*.cpp / *_avx512*.cpp files, never by generic code.
#pragma once

#include <immintrin.h>

#include "base/simd_dispatch.h"

namespace vlkv::float_kernels {

#define VLKV_FK_AVX2 VLKV_TARGET(VLKV_ISA_AVX2)
#define VLKV_FK_AVX512 VLKV_TARGET(VLKV_ISA_AVX512)
VLKV_FK_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Horizontal sum. (Built from maskz intrinsics: GCC 12's _mm512_reduce_add_ps and
// _mm512_cvtph_ps trip -Wmaybe-uninitialized inside its own headers.)
VLKV_FK_AVX512 inline float hsum16(__m512 v) {
  const __m512d x = _mm512_castps_pd(v);
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, x, 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, x, 1));
  return hsum8(_mm256_add_ps(lo, hi));
}
#undef VLKV_FK_AVX2
#undef VLKV_FK_AVX512

}  // namespace vlkv::float_kernels
