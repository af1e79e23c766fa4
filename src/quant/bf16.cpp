// BF16: bfloat16 per weight (block of 1): the top 16 bits of an f32. Widening is exact;
// narrowing rounds to nearest even (NaN stays quiet), as ggml's.
#include <immintrin.h>

#include "base/cpu_features.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(p + 2 * i));
}
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

VLKV_TARGET_AVX2 __m256 load8_avx2(const uint16_t* h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))), 16));
}
VLKV_TARGET_AVX512 __m512 load16_avx512(const uint16_t* h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h))), 16));
}

VLKV_TARGET_AVX2 void dequantize_avx2(const uint16_t* h, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_avx2(h + i));
  for (; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}
VLKV_TARGET_AVX512 void dequantize_avx512(const uint16_t* h, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load16_avx512(h + i));
  for (; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}

VLKV_TARGET_AVX2 float dot_avx2(const uint16_t* h, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load8_avx2(h + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load8_avx2(h + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8_avx2(h + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8_avx2(h + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8_avx2(h + i), _mm256_loadu_ps(x + i), a0);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  float sum = _mm_cvtss_f32(v);
  for (; i < n; ++i) sum += bf16_to_fp32(h[i]) * x[i];
  return sum;
}

VLKV_TARGET_AVX512 float dot_avx512(const uint16_t* h, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(load16_avx512(h + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load16_avx512(h + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load16_avx512(h + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load16_avx512(h + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load16_avx512(h + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {  // masked tail
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 w = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + i)), 16));
    a1 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

void dequantize(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  switch (simd_level()) {
    case SimdLevel::kAvx512: return dequantize_avx512(h, dst, n);
    case SimdLevel::kAvx2: return dequantize_avx2(h, dst, n);
    case SimdLevel::kScalar: break;
  }
  dequantize_ref(src, dst, n);
}

float dot(const void* row, const float* x, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  switch (simd_level()) {
    case SimdLevel::kAvx512: return dot_avx512(h, x, n);
    case SimdLevel::kAvx2: return dot_avx2(h, x, n);
    case SimdLevel::kScalar: break;
  }
  return dot_scalar<dequantize_ref, 1, 2>(row, x, n);
}

}  // namespace

const WeightFormat kBf16Format = {GgmlType::kBF16, "bf16", 1, 2, dequantize_ref, quantize_ref,
                                 dequantize, dot};

}  // namespace vlkv::quant
