// AVX2 rounding of activation blocks (q8_activations_kernels.h).
#include <immintrin.h>

#include "base/fp16.h"
#include "base/simd_dispatch.h"
#include "quant/q8_activations_kernels.h"

namespace vlkv {
namespace {

VLKV_TARGET(VLKV_ISA_AVX2) int32_t hsum_epi32_avx2(__m256i s) {
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
  return _mm_cvtsi128_si32(r);
}

// Same codes as the scalar loop, bit for bit: round half away from zero is trunc(v) plus
// sign(v) where |v - trunc(v)| >= 0.5 (that difference is exact in f32).
VLKV_TARGET(VLKV_ISA_AVX2) void quantize_block_avx2(const float* xb, int8_t* q, float* d,
                                                                   int32_t* half_sum) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(xb + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float scale = q8_block_scale(_mm_cvtss_f32(m));
  const __m256 id = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  __m256i codes[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 x = _mm256_mul_ps(v[i], id);
    const __m256 t = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 away = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(x, t), abs_mask), half, _CMP_GE_OQ);
    const __m256 step = _mm256_or_ps(_mm256_and_ps(x, sign_mask), one);  // ±1 with the sign of x
    codes[i] = _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(away, step)));
  }
  const __m256i s01 = _mm256_add_epi32(codes[0], codes[1]), s23 = _mm256_add_epi32(codes[2], codes[3]);
  half_sum[0] = hsum_epi32_avx2(s01);
  half_sum[1] = hsum_epi32_avx2(s23);
  // int32 -> int16 -> int8 with saturation (codes are within ±127); packs interleave lanes.
  const __m256i w16 = _mm256_packs_epi32(codes[0], codes[1]);
  const __m256i w16b = _mm256_packs_epi32(codes[2], codes[3]);
  const __m256i b8 = _mm256_packs_epi16(w16, w16b);
  const __m256i ordered = _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
  *d = fp16_to_fp32(fp32_to_fp16(scale));
}

}  // namespace

const QuantizeQ8BlockFn kQuantizeQ8BlockAvx2 = quantize_block_avx2;

}  // namespace vlkv
