// AVX-512 kernels of the shared bit-plane ops (sign1_planes.h): 16 tokens per slab, each
// plane's 16 bits a mask register (masked adds, test-into-mask).
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv::sign1 {
namespace {

// The 16 bits of plane j in the slab at pb (planes `stride` bytes apart); the last half
// slab of a group has only 8.
inline __mmask16 slab_mask(const uint8_t* pb, int j, int stride, bool full) {
  const uint8_t* p = pb + static_cast<int64_t>(j) * stride;
  if (!full) return p[0];
  uint16_t m;
  std::memcpy(&m, p, 2);
  return m;
}

#define VLKV_S1_AVX512 VLKV_TARGET(VLKV_ISA_AVX512)

// RB query rows at once: each plane's mask is loaded once for all rows (2 RB independent
// chains per 16-token slab). The planes are mixk's (n_out low, n_out high, n_sign sign
// planes): a 2-bit channel's two masks make one code vector lo + 2 hi (two masked ops),
// then one FMA per row (w_high = 2 w_low exactly): 2 + RB ops instead of 2 RB. Plain
// planes are n_out = 0.
template <int RB>
VLKV_S1_AVX512 void rows_block(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                               const float* base, float scale, float* lg, int64_t ld) {
  const int stride = group / 8, n_planes = 2 * n_out + n_sign;
  const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
  for (int t0 = 0; t0 < group; t0 += 16) {
    const uint8_t* pb = planes + t0 / 8;
    const bool full = group - t0 >= 16;
    __m512 a[RB], b[RB];  // two chains per row
    for (int r = 0; r < RB; ++r) {
      a[r] = _mm512_set1_ps(base[r]);
      b[r] = _mm512_setzero_ps();
    }
    auto mask_of = [&](int j) { return slab_mask(pb, j, stride, full); };
    for (int j = 0; j < n_out; ++j) {
      const __m512 lo = _mm512_maskz_mov_ps(mask_of(j), one);
      const __m512 code = _mm512_mask_add_ps(lo, mask_of(n_out + j), lo, two);
      for (int r = 0; r < RB; ++r) {
        const __m512 wr = _mm512_set1_ps(w[static_cast<int64_t>(r) * n_planes + j]);
        if (j % 2 == 0) a[r] = _mm512_fmadd_ps(code, wr, a[r]);
        else b[r] = _mm512_fmadd_ps(code, wr, b[r]);
      }
    }
    const float* ws = w + 2 * n_out;
    int k = 0;
    for (; k + 2 <= n_sign; k += 2) {
      const __mmask16 m0 = mask_of(2 * n_out + k), m1 = mask_of(2 * n_out + k + 1);
      for (int r = 0; r < RB; ++r) {
        a[r] = _mm512_mask_add_ps(a[r], m0, a[r], _mm512_set1_ps(ws[static_cast<int64_t>(r) * n_planes + k]));
        b[r] = _mm512_mask_add_ps(b[r], m1, b[r], _mm512_set1_ps(ws[static_cast<int64_t>(r) * n_planes + k + 1]));
      }
    }
    if (k < n_sign) {
      const __mmask16 m0 = mask_of(2 * n_out + k);
      for (int r = 0; r < RB; ++r)
        a[r] = _mm512_mask_add_ps(a[r], m0, a[r], _mm512_set1_ps(ws[static_cast<int64_t>(r) * n_planes + k]));
    }
    const __mmask16 lanes = full ? __mmask16(0xffff) : __mmask16(0xff);
    for (int r = 0; r < RB; ++r)
      _mm512_mask_storeu_ps(lg + r * ld + t0, lanes, _mm512_mul_ps(_mm512_add_ps(a[r], b[r]), _mm512_set1_ps(scale)));
  }
}

}  // namespace

VLKV_S1_AVX512 void mixk_plane_scores_rows_avx512(const uint8_t* planes, int n_out, int n_sign, int group,
                                                  const float* w, const float* base, int n_rows, float scale, float* lg,
                                                  int64_t ld) {
  const int n_planes = 2 * n_out + n_sign;
  for_row_blocks(n_rows, [&]<int RB>(int r0) {
    rows_block<RB>(planes, n_out, n_sign, group, w + static_cast<int64_t>(r0) * n_planes, base + r0, scale,
                   lg + r0 * ld, ld);
  });
}

VLKV_S1_AVX512 void plane_scores_rows_avx512(const uint8_t* planes, int n_planes, int group, const float* w,
                                             const float* base, int n_rows, float scale, float* lg, int64_t ld) {
  mixk_plane_scores_rows_avx512(planes, 0, n_planes, group, w, base, n_rows, scale, lg, ld);
}

VLKV_S1_AVX512 void plane_sums_avx512(const uint8_t* planes, int n_planes, int group, const float* p,
                                             float* u) {
  alignas(64) uint32_t words[16];
  for (int j0 = 0; j0 < n_planes; j0 += 16) {
    const int nj = n_planes - j0 < 16 ? n_planes - j0 : 16;
    __m512 u0 = _mm512_setzero_ps(), u1 = u0;
    for (int t0 = 0; t0 < group; t0 += 32) {
      __m512i wv;
      if (group == 32) {  // the planes are the words: one (masked) load
        wv = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << nj) - 1), planes + 4 * static_cast<int64_t>(j0));
      } else {
        for (int i = 0; i < 16; ++i) words[i] = i < nj ? plane_word(planes, group, j0 + i, t0) : 0u;
        wv = _mm512_load_si512(words);
      }
      const int nt = group - t0 < 32 ? group - t0 : 32;
      int t = 0;
      for (; t + 2 <= nt; t += 2) {
        const __mmask16 m0 = _mm512_test_epi32_mask(wv, _mm512_set1_epi32(static_cast<int>(1u << t)));
        const __mmask16 m1 = _mm512_test_epi32_mask(wv, _mm512_set1_epi32(static_cast<int>(1u << (t + 1))));
        u0 = _mm512_mask_add_ps(u0, m0, u0, _mm512_set1_ps(p[t0 + t]));
        u1 = _mm512_mask_add_ps(u1, m1, u1, _mm512_set1_ps(p[t0 + t + 1]));
      }
      for (; t < nt; ++t) {
        const __mmask16 m0 = _mm512_test_epi32_mask(wv, _mm512_set1_epi32(static_cast<int>(1u << t)));
        u0 = _mm512_mask_add_ps(u0, m0, u0, _mm512_set1_ps(p[t0 + t]));
      }
    }
    _mm512_mask_storeu_ps(u + j0, static_cast<__mmask16>((1u << nj) - 1), _mm512_add_ps(u0, u1));
  }
}


#undef VLKV_S1_AVX512

}  // namespace vlkv::sign1
