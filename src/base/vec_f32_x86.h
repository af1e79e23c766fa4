// The f32 vector operations of the x86 tiers, one struct per vector width, for the loops
// written once over a VecOps parameter (kernels/gemm_f32_loops.inc, quant/float_row_loops.inc):
// V, kLanes, load/store(float*), zero(), set1(float), splat(const float*) (one value to every
// lane), add, sub, mul, min, max, fma(a, b, c) = a * b + c, fnma(a, b, c) = c - a * b, floor,
// pow2(fx) = 2^fx for integral fx. Each struct sits in its tier's target region and an unnamed
// namespace, so every including file keeps its own copy (base/simd_dispatch.h says why).
#pragma once

#include <immintrin.h>

#include "base/simd_dispatch.h"

namespace vlkv::x86 {

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
namespace {
struct F32x8 {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V splat(const float* p) { return _mm256_broadcast_ss(p); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V floor(V a) { return _mm256_floor_ps(a); }
  static V pow2(V fx) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23));
  }
};
}  // namespace
VLKV_TARGET_END

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512)
namespace {
struct F32x16 {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V splat(const float* p) { return _mm512_set1_ps(*p); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static V floor(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static V pow2(V fx) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23));
  }
};
}  // namespace
VLKV_TARGET_END

}  // namespace vlkv::x86
