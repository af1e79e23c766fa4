// AVX2 (+FMA, F16C) variant of the f32 / f16 fused kernels (float_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "base/simd_dispatch.h"
#include "kv/codec.h"
#include "kv/codecs/float_hsum_x86.h"
#include "kv/codecs/float_kernels.h"
#include "kv/codecs/view_prefetch.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
namespace vlkv::float_kernels {
namespace {

// ---------------- AVX2 + FMA + F16C ----------------

template <class Elem>
inline __m256 load8(const Elem* x) {
  if constexpr (std::is_same_v<Elem, float>) return _mm256_loadu_ps(x);
  else return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}


// AVX2 blocked kernels (d % 8 == 0): scores 2 rows x 4 keys (8 ymm accumulators, one
// hadd tree); accumulate up to 4 rows x 16 channels in registers per 64-token sub-block.

// 8 vectors -> one vector whose element i is the sum of v[i].
inline __m256 reduce_8(const __m256* v) {
  const __m256 h01 = _mm256_hadd_ps(v[0], v[1]), h23 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 h45 = _mm256_hadd_ps(v[4], v[5]), h67 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 a = _mm256_hadd_ps(h01, h23), b = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

// RB (1 or 2) query rows x keys k0 .. k0 + 3 d (rows of d): lr[r * ld + a] = scale * q_r . k_a.
template <class Elem, int RB>
void scores_4keys(const float* q, int d, const Elem* k0, float scale, float* lr, int64_t ld) {
  __m256 acc[8];
  for (int x = 0; x < 8; ++x) acc[x] = _mm256_setzero_ps();
  for (int i = 0; i < d; i += 8) {
    const __m256 ka[4] = {load8(k0 + i), load8(k0 + d + i), load8(k0 + 2 * d + i), load8(k0 + 3 * d + i)};
    for (int b = 0; b < RB; ++b) {
      const __m256 qv = _mm256_loadu_ps(q + b * d + i);
      for (int a = 0; a < 4; ++a) acc[4 * b + a] = _mm256_fmadd_ps(qv, ka[a], acc[4 * b + a]);
    }
  }
  const __m256 sums = _mm256_mul_ps(reduce_8(acc), _mm256_set1_ps(scale));  // element 4*row + key
  _mm_storeu_ps(lr, _mm256_castps256_ps128(sums));
  if constexpr (RB == 2) _mm_storeu_ps(lr + ld, _mm256_extractf128_ps(sums, 1));
}

struct VecOps {
  using V = __m256;
  static constexpr int kLanes = 8, kMaxVecs = 2, kScoreRows = 2, kDimMultiple = 8;
  template <class Elem>
  static V load(const Elem* x) { return load8(x); }
  static V loadf(const float* x) { return _mm256_loadu_ps(x); }
  static void storef(float* x, V v) { _mm256_storeu_ps(x, v); }
  static V splat(const float* x) { return _mm256_broadcast_ss(x); }
  static V zero() { return _mm256_setzero_ps(); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  // q . k over d (a multiple of 8) in one 8-lane chain.
  template <class Elem>
  static float dot(const float* q, const Elem* k, int d) {
    V a = zero();
    for (int i = 0; i < d; i += 8) a = fma(loadf(q + i), load8(k + i), a);
    return hsum8(a);
  }
  // The fallbacks' tails, one element at a time.
  template <class Elem>
  static float finish_dot(V acc, const float* q, const Elem* k, int i, int d) {
    float s = hsum8(acc);
    for (; i < d; ++i) s += q[i] * to_f32(k[i]);
    return s;
  }
  template <int N, class Elem>
  static void axpy_tail(const float* w, const Elem* const* v, int i, int d, float* o) {
    for (; i < d; ++i) {
      if constexpr (N == 4)
        o[i] += w[0] * to_f32(v[0][i]) + w[1] * to_f32(v[1][i]) + w[2] * to_f32(v[2][i]) + w[3] * to_f32(v[3][i]);
      else
        o[i] += w[0] * to_f32(v[0][i]);
    }
  }
};

#include "kv/codecs/float_fallback_x86.inc"
#include "kv/codecs/float_kernel_loops.inc"

}  // namespace

const FloatKernels kFloatKernelsAvx2 = float_kernel_table();

}  // namespace vlkv::float_kernels
VLKV_TARGET_END
