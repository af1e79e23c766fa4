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

// Cephes-style expf: n = round(x log2 e), r = x - n ln 2 (two-part), degree-6 polynomial
// on |r| <= ln2/2, times 2^n. Relative error ~2 ulp; x below -87 flushes to ~0.
inline __m256 exp_avx2(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

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
