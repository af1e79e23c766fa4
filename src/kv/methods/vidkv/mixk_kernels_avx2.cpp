// AVX2 kernels of mixk's fused scores (mixk_kernels.h).
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/mixk_kernels.h"

namespace vlkv::mixk {
namespace {

#define VLKV_MK_AVX2 VLKV_TARGET(VLKV_ISA_AVX2)

VLKV_MK_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

// kLeftPack[b] = the lanes of the set bits of b first, in ascending order (AVX2 has no
// compress): permutevar8x32 by it packs 8 channels' selected values to the front.
struct LeftPackTable {
  alignas(32) int32_t idx[256][8];
  LeftPackTable() {
    for (int b = 0; b < 256; ++b) {
      int n = 0;
      for (int i = 0; i < 8; ++i)
        if ((b >> i) & 1) idx[b][n++] = i;
      for (; n < 8; ++n) idx[b][n] = 0;
    }
  }
};
const LeftPackTable& left_pack() {
  static const LeftPackTable t;
  return t;
}

}  // namespace

VLKV_MK_AVX2 void row_weights_avx2(const float* qo, const float* qc, const float* os, const float* sig, int n_out,
                                   int nc, float* w, float* base) {
  __m256 bo = _mm256_setzero_ps(), bn = bo;
  int j = 0;
  for (; j + 8 <= n_out; j += 8) {
    // os: 8 {scale, min} pairs -> scales and mins (in-lane shuffles, then fix the lane order).
    const __m256 p0 = _mm256_loadu_ps(os + 2 * j), p1 = _mm256_loadu_ps(os + 2 * j + 8);
    const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(p0, p1, 0x88)), 0xd8));
    const __m256 mn = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(p0, p1, 0xdd)), 0xd8));
    const __m256 q = _mm256_loadu_ps(qo + j);
    const __m256 ws = _mm256_mul_ps(q, s);
    bo = _mm256_fmadd_ps(q, mn, bo);
    _mm256_storeu_ps(w + j, ws);
    _mm256_storeu_ps(w + n_out + j, _mm256_add_ps(ws, ws));
  }
  float so = hsum(bo);
  for (; j < n_out; ++j) {
    so += qo[j] * os[2 * j + 1];
    w[j] = qo[j] * os[2 * j];
    w[n_out + j] = 2.0f * w[j];
  }
  const __m256 m2 = _mm256_set1_ps(-2.0f);
  int k = 0;
  for (; k + 8 <= nc; k += 8) {
    const __m256 qs = _mm256_mul_ps(_mm256_loadu_ps(qc + k), _mm256_loadu_ps(sig + k));
    bn = _mm256_add_ps(bn, qs);
    _mm256_storeu_ps(w + 2 * n_out + k, _mm256_mul_ps(qs, m2));
  }
  float sn = hsum(bn);
  for (; k < nc; ++k) {
    const float qs = qc[k] * sig[k];
    sn += qs;
    w[2 * n_out + k] = -2.0f * qs;
  }
  *base = so + sn;
}

VLKV_MK_AVX2 void split_query_avx2(const float* q, const uint8_t* mask, int d, float* qo, float* qn) {
  const auto& lp = left_pack().idx;
  int no = 0, nn = 0, c = 0;
  for (; c + 8 <= d; c += 8) {
    const unsigned bits = mask[c / 8], inv = ~bits & 0xffu;
    const __m256 v = _mm256_loadu_ps(q + c);
    _mm256_storeu_ps(qo + no, _mm256_permutevar8x32_ps(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(lp[bits]))));
    _mm256_storeu_ps(qn + nn, _mm256_permutevar8x32_ps(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(lp[inv]))));
    no += __builtin_popcount(bits);
    nn += __builtin_popcount(inv);
  }
  for (; c < d; ++c) {
    const int bit = (mask[c / 8] >> (c % 8)) & 1;
    qo[no] = q[c];
    qn[nn] = q[c];
    no += bit;
    nn += 1 - bit;
  }
}

#undef VLKV_MK_AVX2

}  // namespace vlkv::mixk
