// AVX2 and AVX-512 f16-table lookups (f16_table_lookup.h): vcvtps2ph rounds to nearest even
// as fp32_to_fp16 does (inf and NaN inputs too: both give an inf/NaN index), then a gather.
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kernels/f16_table_lookup.h"

// GCC 12: the AVX-512 convert/gather intrinsics' undefined pass-through operand trips
// -W(maybe-)uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace vlkv {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

VLKV_TARGET(VLKV_ISA_AVX2) void lookup_avx2(const float* table, const float* x, int64_t n, float* out, bool gelu_clamp) {
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, kRound));
    __m256 r = _mm256_i32gather_ps(table, idx, 4);
    if (gelu_clamp) {
      r = _mm256_blendv_ps(r, v, _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
      r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_cmp_ps(v, lo, _CMP_LE_OQ));
    }
    _mm256_storeu_ps(out + i, r);
  }
  f16_table_lookup_scalar(table, x + i, n - i, out + i, gelu_clamp);
}

VLKV_TARGET(VLKV_ISA_AVX512) void lookup_avx512(const float* table, const float* x, int64_t n, float* out,
                                                bool gelu_clamp) {
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, kRound));
    __m512 r = _mm512_i32gather_ps(idx, table, 4);
    if (gelu_clamp) {
      r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, hi, _CMP_GE_OQ), v);
      r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, lo, _CMP_LE_OQ), _mm512_setzero_ps());
    }
    _mm512_storeu_ps(out + i, r);
  }
  f16_table_lookup_scalar(table, x + i, n - i, out + i, gelu_clamp);
}

}  // namespace

const F16TableLookupFn kF16TableLookupAvx2 = &lookup_avx2;
const F16TableLookupFn kF16TableLookupAvx512 = &lookup_avx512;

}  // namespace vlkv
