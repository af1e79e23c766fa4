// The x86 row kernels shared by the two 16-bit float weight formats (F16, BF16): they
// differ only in how 8 / 16 halves widen to f32, supplied by a traits type:
//   struct Traits {
//     static float to_f32(uint16_t h);
//     VLKV_TARGET_AVX2   static __m256 widen8(__m128i h);
//     VLKV_TARGET_AVX512 static __m512 widen16(__m256i h);
//   };
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "quant/simd_blocks_x86.h"  // VLKV_TARGET_AVX2 / _AVX512

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

// The variants of a format with traits T (dequantize_row and dot take the row as void*).
template <class T>
void dequantize_avx2_row(const void* src, float* dst, int64_t n) {
  dequantize_avx2<T>(static_cast<const uint16_t*>(src), dst, n);
}
template <class T>
float dot_avx2_row(const void* row, const float* x, int64_t n) {
  return dot_avx2<T>(static_cast<const uint16_t*>(row), x, n);
}
template <class T>
void dequantize_avx512_row(const void* src, float* dst, int64_t n) {
  dequantize_avx512<T>(static_cast<const uint16_t*>(src), dst, n);
}
template <class T>
float dot_avx512_row(const void* row, const float* x, int64_t n) {
  return dot_avx512<T>(static_cast<const uint16_t*>(row), x, n);
}
template <class T>
constexpr FormatKernels avx2_variant() {
  return {dequantize_avx2_row<T>, dot_avx2_row<T>};
}
template <class T>
constexpr FormatKernels avx512_variant() {
  return {dequantize_avx512_row<T>, dot_avx512_row<T>};
}

}  // namespace vlkv::quant::half_rows
