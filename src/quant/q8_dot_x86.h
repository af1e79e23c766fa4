// x86 dot products of block-format weights with 8-bit activations (Q8Activations), on the
// same Group32 decoders as the f32 loops in simd_blocks.h. Per group of 32: integer
// multiply-adds of |q| and sign-adjusted activation codes (llama.cpp's sign trick, so
// the unsigned x signed instructions apply), then one f32 scale per 16 weights.
#pragma once

#include "base/simd_dispatch.h"
#include "quant/q8_activations.h"
#include "quant/simd_blocks_x86.h"

#define VLKV_TARGET_AVX512_VNNI VLKV_TARGET(VLKV_ISA_AVX512_VNNI)

namespace vlkv::quant {

// Products of 32 signed weight codes q with 32 activation codes, summed per 4 bytes: 8 int32.
VLKV_TARGET_AVX2 inline __m256i group_products_avx2(__m256i q, __m256i xq) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(xq, q));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}
VLKV_TARGET_AVX512_VNNI inline __m256i group_products_vnni(__m256i q, __m256i xq) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(q), _mm256_sign_epi8(xq, q));
}

// Shared loop; Products is one of the two functions above (inlined into each target).
#define VLKV_DEFINE_DOT_Q8(NAME, TARGET, PRODUCTS)                                                     \
  template <class T>                                                                                  \
  TARGET float NAME(const void* row, const Q8Activations& x, int64_t n) {                            \
    const auto* p = static_cast<const uint8_t*>(row);                                                 \
    const int64_t nb = n / T::kBlockElems;                                                            \
    const int8_t* xq = x.q.data();                                                                    \
    const float* xd = x.d.data();                                                                     \
    const int32_t* hs = x.half_sum.data();                                                            \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                                    \
    float bias = 0.0f;                                                                                \
    for (int64_t b = 0; b < nb; ++b, p += T::kBlockBytes) {                                           \
      Group32 g[T::kGroups];                                                                          \
      T::decode(p, g);                                                                                \
      _Pragma("GCC unroll 8") for (int k = 0; k < T::kGroups; ++k) {                                  \
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));                  \
        const __m256 prod = _mm256_cvtepi32_ps(PRODUCTS(g[k].q, xv));                                 \
        const float d = *xd;                                                                          \
        const __m256 scale = _mm256_set_m128(_mm_set1_ps(g[k].s1 * d), _mm_set1_ps(g[k].s0 * d));     \
        if (k & 1) acc1 = _mm256_fmadd_ps(prod, scale, acc1);                                         \
        else acc0 = _mm256_fmadd_ps(prod, scale, acc0);                                               \
        if constexpr (T::kBias) bias += (g[k].b0 * static_cast<float>(hs[0]) + g[k].b1 * static_cast<float>(hs[1])) * d; \
        xq += 32;                                                                                     \
        xd += 1;                                                                                      \
        hs += 2;                                                                                      \
      }                                                                                               \
    }                                                                                                 \
    return hsum_avx2(_mm256_add_ps(acc0, acc1)) + bias;                                               \
  }

VLKV_DEFINE_DOT_Q8(dot_q8_avx2, VLKV_TARGET_AVX2, group_products_avx2)
VLKV_DEFINE_DOT_Q8(dot_q8_vnni, VLKV_TARGET_AVX512_VNNI, group_products_vnni)
#undef VLKV_DEFINE_DOT_Q8

// The x86 variants of a block format with traits T (AVX2; AVX-512 on the decoder's LUTs
// when T has make_luts, else on its Group32 decoder; AVX-512 VNNI for dot_q8).
template <class T>
constexpr FormatKernels avx2_variant() {
  return {dequantize_avx2<T>, dot_avx2<T>, dot_q8_avx2<T>};
}
template <class T, bool kVnni>
constexpr FormatKernels avx512_variant() {
  constexpr auto dot_q8 = kVnni ? dot_q8_vnni<T> : dot_q8_avx2<T>;
  if constexpr (requires { &T::make_luts; }) return {dequantize_lut_avx512<T>, dot_lut_avx512<T>, dot_q8};
  else return {dequantize_avx512<T>, dot_avx512<T>, dot_q8};
}

}  // namespace vlkv::quant
