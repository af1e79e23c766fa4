// AVX-512 variant of the softmax helpers (softmax_kernels.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/simd_dispatch.h"
#include "kv/softmax_kernels.h"

// GCC 12's AVX-512 headers seed intrinsics with _mm512_undefined_*(), which trips
// -Wmaybe-uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512)
namespace vlkv::attn {
namespace {

struct ExpOps {
  using V = __m512;
  static V splat(float f) { return _mm512_set1_ps(f); }
  static V max(V a, V b) { return _mm512_maskz_max_ps(0xffff, a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V round(V a) { return _mm512_maskz_roundscale_ps(0xffff, a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  static V scale2n(V y, V n) { return _mm512_maskz_scalef_ps(0xffff, y, n); }
};
#include "kv/exp_cephes.inc"
inline __m512 exp_avx512(__m512 x) { return exp_cephes<ExpOps>(x); }

float exp_sub_sum_avx512(float* x, int64_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 k = n - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - t)) - 1);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_mask_loadu_ps(vm, k, x + t), vm));
    _mm512_mask_storeu_ps(x + t, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
  }
  const __m512d a = _mm512_castps_pd(acc);
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, a, 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, a, 1));
  const __m256 v = _mm256_add_ps(lo, hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float max_avx512(const float* x, int64_t n) {
  __m512 mx = _mm512_set1_ps(x[0]);
  for (int64_t t = 0; t < n; t += 16) {
    const __mmask16 k = n - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - t)) - 1);
    mx = _mm512_mask_max_ps(mx, k, mx, _mm512_maskz_loadu_ps(k, x + t));
  }
  alignas(64) float tmp[16];
  _mm512_store_ps(tmp, mx);
  float m = tmp[0];
  for (int i = 1; i < 16; ++i) m = std::max(m, tmp[i]);
  return m;
}

}  // namespace

const SoftmaxKernels kSoftmaxKernelsAvx512{exp_sub_sum_avx512, max_avx512};

}  // namespace vlkv::attn
VLKV_TARGET_END
