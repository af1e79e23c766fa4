// Dot products of block-format weights with 8-bit activations (Q8Activations), on the
// same Group32 decoders as the f32 loops in simd_blocks.h. Per group of 32: integer
// multiply-adds of |q| and sign-adjusted activation codes (llama.cpp's sign trick, so
// the unsigned x signed instructions apply), then one f32 scale per 16 weights.
#pragma once

#include "quant/q8_activations.h"
#include "quant/simd_blocks.h"

#define VLKV_TARGET_AVX512_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace vlkv::quant {

// Scalar reference: exact dequantization, then sum w * q * d in double.
template <void (*Deq)(const void*, float*, int64_t), int64_t kBlockElems, size_t kBlockBytes>
float dot_q8_scalar(const void* row, const Q8Activations& x, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  float buf[kBlockElems];  // one dequantized block
  double acc = 0.0;
  for (int64_t b = 0; b < n / kBlockElems; ++b) {
    Deq(p + b * kBlockBytes, buf, kBlockElems);
    for (int64_t j = 0; j < kBlockElems; ++j) {
      const int64_t i = b * kBlockElems + j;
      acc += static_cast<double>(buf[j]) * x.q[static_cast<size_t>(i)] * x.d[static_cast<size_t>(i / 32)];
    }
  }
  return static_cast<float>(acc);
}

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

// Dispatch: VNNI where the CPU has it (at the AVX-512 level), else AVX2, else scalar.
template <class T, void (*DeqRef)(const void*, float*, int64_t)>
float dot_q8_dispatch(const void* row, const Q8Activations& x, int64_t n) {
  switch (simd_level()) {
    case SimdLevel::kAvx512:
      if (simd_tier() == SimdTier::kAvx512Vnni) return dot_q8_vnni<T>(row, x, n);
      return dot_q8_avx2<T>(row, x, n);
    case SimdLevel::kAvx2: return dot_q8_avx2<T>(row, x, n);
    case SimdLevel::kScalar: break;
  }
  return dot_q8_scalar<DeqRef, T::kBlockElems, T::kBlockBytes>(row, x, n);
}

}  // namespace vlkv::quant
