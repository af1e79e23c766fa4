// AVX2 (+FMA) variant of the softmax helpers (softmax_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/simd_dispatch.h"
#include "kv/softmax_kernels.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
namespace vlkv::attn {
namespace {

struct ExpOps {
  using V = __m256;
  static V splat(float f) { return _mm256_set1_ps(f); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
  static V scale2n(V y, V n) {  // through the exponent bits
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  }
};
#include "kv/exp_cephes.inc"
inline __m256 exp_avx2(__m256 x) { return exp_cephes<ExpOps>(x); }

float exp_sub_sum_avx2(float* x, int64_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + t), vm));
    _mm256_storeu_ps(x + t, e);
    acc = _mm256_add_ps(acc, e);
  }
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  if (t < n) {  // tail through the same polynomial (one padded vector)
    alignas(32) float tmp[8];
    for (int i = 0; i < 8; ++i) tmp[i] = t + i < n ? x[t + i] : m;
    _mm256_store_ps(tmp, exp_avx2(_mm256_sub_ps(_mm256_load_ps(tmp), vm)));
    for (int64_t i = 0; t + i < n; ++i) sum += (x[t + i] = tmp[i]);
  }
  return sum;
}

float max_avx2(const float* x, int64_t n) {
  __m256 mx = _mm256_set1_ps(x[0]);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + t));
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, mx);
  float m = tmp[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, tmp[i]);
  for (; t < n; ++t) m = std::max(m, x[t]);
  return m;
}

}  // namespace

const SoftmaxKernels kSoftmaxKernelsAvx2{exp_sub_sum_avx2, max_avx2};

}  // namespace vlkv::attn
VLKV_TARGET_END
