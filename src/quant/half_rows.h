// The SIMD row kernels shared by the two 16-bit float weight formats (F16, BF16): they
// differ only in how 8 / 16 halves widen to f32, supplied by a traits type:
//   struct Traits {
//     static float to_f32(uint16_t h);
//     VLKV_TARGET_AVX2   static __m256 widen8(__m128i h);
//     VLKV_TARGET_AVX512 static __m512 widen16(__m256i h);
//   };
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "base/cpu_features.h"
#include "quant/quant_internal.h"

namespace vlkv::quant::half_rows {

template <class T>
VLKV_TARGET_AVX2 inline __m256 load8(const uint16_t* h) {
  return T::widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}
template <class T>
VLKV_TARGET_AVX512 inline __m512 load16(const uint16_t* h) {
  return T::widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}

template <class T>
VLKV_TARGET_AVX2 void dequantize_avx2(const uint16_t* h, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8<T>(h + i));
  for (; i < n; ++i) dst[i] = T::to_f32(h[i]);
}
template <class T>
VLKV_TARGET_AVX512 void dequantize_avx512(const uint16_t* h, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load16<T>(h + i));
  for (; i < n; ++i) dst[i] = T::to_f32(h[i]);
}

template <class T>
VLKV_TARGET_AVX2 float dot_avx2(const uint16_t* h, const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load8<T>(h + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load8<T>(h + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8<T>(h + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8<T>(h + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load8<T>(h + i), _mm256_loadu_ps(x + i), a0);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  float sum = _mm_cvtss_f32(v);
  for (; i < n; ++i) sum += T::to_f32(h[i]) * x[i];
  return sum;
}

template <class T>
VLKV_TARGET_AVX512 float dot_avx512(const uint16_t* h, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    a0 = _mm512_fmadd_ps(load16<T>(h + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(load16<T>(h + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(load16<T>(h + i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(load16<T>(h + i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(load16<T>(h + i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {  // masked tail
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    a1 = _mm512_fmadd_ps(T::widen16(_mm256_maskz_loadu_epi16(m, h + i)), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Dispatch on simd_level(); `ref` is the format's scalar dequantizer.
template <class T, void (*ref)(const void*, float*, int64_t)>
void dequantize(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  switch (simd_level()) {
    case SimdLevel::kAvx512: return dequantize_avx512<T>(h, dst, n);
    case SimdLevel::kAvx2: return dequantize_avx2<T>(h, dst, n);
    case SimdLevel::kScalar: break;
  }
  ref(src, dst, n);
}
template <class T, void (*ref)(const void*, float*, int64_t)>
float dot(const void* row, const float* x, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  switch (simd_level()) {
    case SimdLevel::kAvx512: return dot_avx512<T>(h, x, n);
    case SimdLevel::kAvx2: return dot_avx2<T>(h, x, n);
    case SimdLevel::kScalar: break;
  }
  return dot_scalar<ref, 1, 2>(row, x, n);
}

}  // namespace vlkv::quant::half_rows
