// The x86 row kernels of the float weight formats (F32, F16, BF16): the loops of
// float_row_loops.inc compiled once per tier (AVX2, AVX-512) inside that tier's target region.
// A format supplies row traits:
//   using Elem;                                       // float or uint16_t
//   static float to_f32(Elem e);
//   VLKV_TARGET_AVX2   static __m256 load8(const Elem* p);
//   VLKV_TARGET_AVX512 static __m512 load16(const Elem* p);
//   VLKV_TARGET_AVX512 static __m512 load16_masked(__mmask16 m, const Elem* p);  // zeros where m is clear
// (HalfRows below builds them for a 16-bit float from its widening).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "base/vec_f32_x86.h"
#include "quant/simd_blocks_x86.h"  // VLKV_TARGET_AVX2 / _AVX512, hsum_avx2

namespace vlkv::quant::float_rows {

// Row traits of a 16-bit float whose widening W provides to_f32(uint16_t),
// VLKV_TARGET_AVX2 widen8(__m128i) and VLKV_TARGET_AVX512 widen16(__m256i).
template <class W>
struct HalfRows : W {
  using Elem = uint16_t;
  VLKV_TARGET_AVX2 static __m256 load8(const uint16_t* h) {
    return W::widen8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
  }
  VLKV_TARGET_AVX512 static __m512 load16(const uint16_t* h) {
    return W::widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
  }
  VLKV_TARGET_AVX512 static __m512 load16_masked(__mmask16 m, const uint16_t* h) {
    return W::widen16(_mm256_maskz_loadu_epi16(m, h));
  }
};

// Each tier's copy in an unnamed namespace, so every including file keeps its own (as
// base/simd_dispatch.h asks of ISA code in headers).
VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
namespace avx2 {
namespace {
struct VecOps : x86::F32x8 {
  template <class T>
  static V load_elems(const typename T::Elem* p) { return T::load8(p); }
  // The sum of the partial sums, then the last left (< 8) products one by one.
  template <class T>
  static float finish(const typename T::Elem* h, const float* x, int64_t left, V a0, V a1, V a2, V a3) {
    float sum = hsum_avx2(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (int64_t i = 0; i < left; ++i) sum += T::to_f32(h[i]) * x[i];
    return sum;
  }
};
#include "quant/float_row_loops.inc"
}  // namespace
}  // namespace avx2
VLKV_TARGET_END

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512)
namespace avx512 {
namespace {
struct VecOps : x86::F32x16 {
  template <class T>
  static V load_elems(const typename T::Elem* p) { return T::load16(p); }
  // The last left (< 16) products as one masked step, then the sum of the partial sums.
  template <class T>
  static float finish(const typename T::Elem* h, const float* x, int64_t left, V a0, V a1, V a2, V a3) {
    if (left > 0) {
      const __mmask16 m = static_cast<__mmask16>((1u << left) - 1);
      a1 = _mm512_fmadd_ps(T::load16_masked(m, h), _mm512_maskz_loadu_ps(m, x), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
};
#include "quant/float_row_loops.inc"
}  // namespace
}  // namespace avx512
VLKV_TARGET_END

template <class T>
constexpr FormatKernels avx2_variant() {
  return {avx2::dequantize_row<T>, avx2::dot_row<T>};
}
template <class T>
constexpr FormatKernels avx512_variant() {
  return {avx512::dequantize_row<T>, avx512::dot_row<T>};
}

}  // namespace vlkv::quant::float_rows
