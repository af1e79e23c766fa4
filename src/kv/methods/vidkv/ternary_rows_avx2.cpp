// AVX2 kernels of the ternary codec's row-ordered blocks (trit i = t * d + c; head_dim
// % 16 != 0 or G % 4 != 0): f32 math over the int8 codes a 256-entry table unpacked.
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/codecs/float_hsum_x86.h"
#include "kv/codecs/float_kernels.h"
#include "kv/methods/vidkv/ternary_tiles.h"

namespace vlkv::ternt {

#define VLKV_T_AVX2 VLKV_TARGET(VLKV_ISA_AVX2)

// logits[t] = scale * dot(qs, codes[t])       qs: [d], codes: [G, d]
VLKV_T_AVX2 void row_scores_avx2(const float* qs, const int8_t* codes, int G, int d, float scale, float* lr) {
  const int d8 = d & ~7;
  for (int t = 0; t < G; ++t) {
    const int8_t* c = codes + static_cast<int64_t>(t) * d;
    __m256 a = _mm256_setzero_ps();
    for (int i = 0; i < d8; i += 8) {
      const __m256 cv = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + i))));
      a = _mm256_fmadd_ps(_mm256_loadu_ps(qs + i), cv, a);
    }
    float s = float_kernels::hsum8(a);
    for (int i = d8; i < d; ++i) s += qs[i] * c[i];
    lr[t] = s * scale;
  }
}

// out[c] += sig[c] * sum_t p[t] * codes[t, c]
VLKV_T_AVX2 void row_accum_avx2(const float* p, const int8_t* codes, int G, int d, const float* sig, float* o) {
  const int d8 = d & ~7;
  for (int i = 0; i < d8; i += 8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int t = 0;
    for (; t + 2 <= G; t += 2) {
      const int8_t* c = codes + static_cast<int64_t>(t) * d + i;
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t),
                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c)))), a0);
      a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t + 1),
                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + d)))), a1);
    }
    if (t < G)
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t),
                           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                               reinterpret_cast<const __m128i*>(codes + static_cast<int64_t>(t) * d + i)))), a0);
    _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_loadu_ps(sig + i), _mm256_add_ps(a0, a1), _mm256_loadu_ps(o + i)));
  }
  for (int i = d8; i < d; ++i) {
    float s = 0.0f;
    for (int t = 0; t < G; ++t) s += p[t] * codes[static_cast<int64_t>(t) * d + i];
    o[i] += sig[i] * s;
  }
}

#undef VLKV_T_AVX2

}  // namespace vlkv::ternt
