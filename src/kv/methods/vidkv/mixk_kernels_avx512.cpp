// AVX-512 kernels of mixk's fused scores (mixk_kernels.h).
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/mixk_kernels.h"

namespace vlkv::mixk {

VLKV_TARGET(VLKV_ISA_AVX512) void row_weights_avx512(
    const float* qo, const float* qc, const float* os, const float* sig, int n_out, int nc, float* w, float* base) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __m512 bo = _mm512_setzero_ps(), bn = bo;
  for (int j = 0; j < n_out; j += 16) {
    const int left = n_out - j;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const __mmask16 m0 = left >= 8 ? __mmask16(0xffff) : __mmask16((1u << (2 * left)) - 1);
    const __mmask16 m1 = left >= 16 ? __mmask16(0xffff) : left > 8 ? __mmask16((1u << (2 * left - 16)) - 1) : __mmask16(0);
    const __m512 p0 = _mm512_maskz_loadu_ps(m0, os + 2 * j), p1 = _mm512_maskz_loadu_ps(m1, os + 2 * j + 16);
    const __m512 s = _mm512_permutex2var_ps(p0, even, p1), mn = _mm512_permutex2var_ps(p0, odd, p1);
    const __m512 q = _mm512_maskz_loadu_ps(m, qo + j);
    const __m512 ws = _mm512_mul_ps(q, s);
    bo = _mm512_fmadd_ps(q, mn, bo);
    _mm512_mask_storeu_ps(w + j, m, ws);
    _mm512_mask_storeu_ps(w + n_out + j, m, _mm512_add_ps(ws, ws));
  }
  const __m512 m2 = _mm512_set1_ps(-2.0f);
  for (int k = 0; k < nc; k += 16) {
    const int left = nc - k;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const __m512 qs = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, qc + k), _mm512_maskz_loadu_ps(m, sig + k));
    bn = _mm512_add_ps(bn, qs);
    _mm512_mask_storeu_ps(w + 2 * n_out + k, m, _mm512_mul_ps(qs, m2));
  }
  alignas(64) float a[16], b[16];  // (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized)
  _mm512_store_ps(a, bo);
  _mm512_store_ps(b, bn);
  float so = 0.0f, sn = 0.0f;
  for (int i = 0; i < 16; ++i) {
    so += a[i];
    sn += b[i];
  }
  *base = so + sn;
}

// By register compress (no channel lists, no branches).
VLKV_TARGET(VLKV_ISA_AVX512) void split_query_avx512(
    const float* q, const uint8_t* mask, int d, float* qo, float* qn) {
  int no = 0, nn = 0;
  for (int c = 0; c < d; c += 16) {
    const int left = d - c;
    const __mmask16 valid = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const unsigned bits = mask[c / 8] | (left > 8 ? static_cast<unsigned>(mask[c / 8 + 1]) << 8 : 0u);
    const __mmask16 mo = static_cast<__mmask16>(bits & valid), mn = static_cast<__mmask16>(~bits & valid);
    const __m512 v = _mm512_maskz_loadu_ps(valid, q + c);
    _mm512_storeu_ps(qo + no, _mm512_maskz_compress_ps(mo, v));
    _mm512_storeu_ps(qn + nn, _mm512_maskz_compress_ps(mn, v));
    no += __builtin_popcount(mo);
    nn += __builtin_popcount(mn);
  }
}

}  // namespace vlkv::mixk
