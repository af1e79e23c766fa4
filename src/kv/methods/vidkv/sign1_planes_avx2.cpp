// AVX2 kernels of the shared bit-plane ops (sign1_planes.h): 8 tokens per slab, each
// plane's byte of a slab expands to 8 lanes through a 256-entry table.
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/sign1_planes.h"

namespace vlkv::sign1 {
namespace {

#define VLKV_S1_AVX2 VLKV_TARGET(VLKV_ISA_AVX2)

// RB query rows x 2 slabs (16 tokens) at once: each plane's weights are broadcast once
// for both slabs and each table row loaded once for all rows (2 RB FMA chains); `two`:
// the second slab is there (not the last 8 tokens of a group). The planes are mixk's
// (n_out low, n_out high, n_sign sign planes): the low and high planes of a 2-bit channel
// are read as one code lo + 2 hi (w_high = 2 w_low exactly), 2 + 2 RB FMAs per channel
// instead of 4 RB. Plain planes are n_out = 0.
template <int RB>
VLKV_S1_AVX2 void mixk_rows_16(const uint8_t* pb, int n_out, int n_sign, int stride, bool two, const float* w,
                               const float* base, float scale, float* lg, int64_t ld) {
  const auto& lut = byte_floats().f;
  const int n_planes = 2 * n_out + n_sign;
  __m256 a[RB], b[RB];
  for (int r = 0; r < RB; ++r) a[r] = b[r] = _mm256_set1_ps(base[r]);
  const __m256 two_f = _mm256_set1_ps(2.0f);
  for (int j = 0; j < n_out; ++j) {
    const uint8_t* lo = pb + static_cast<int64_t>(j) * stride;
    const uint8_t* hi = pb + static_cast<int64_t>(n_out + j) * stride;
    const __m256 c0 = _mm256_fmadd_ps(_mm256_load_ps(lut[hi[0]]), two_f, _mm256_load_ps(lut[lo[0]]));
    const __m256 c1 = two ? _mm256_fmadd_ps(_mm256_load_ps(lut[hi[1]]), two_f, _mm256_load_ps(lut[lo[1]])) : _mm256_setzero_ps();
    for (int r = 0; r < RB; ++r) {
      const __m256 wr = _mm256_broadcast_ss(w + static_cast<int64_t>(r) * n_planes + j);
      a[r] = _mm256_fmadd_ps(c0, wr, a[r]);
      b[r] = _mm256_fmadd_ps(c1, wr, b[r]);
    }
  }
  for (int k = 0; k < n_sign; ++k) {
    const uint8_t* p = pb + static_cast<int64_t>(2 * n_out + k) * stride;
    const __m256 m0 = _mm256_load_ps(lut[p[0]]);
    const __m256 m1 = two ? _mm256_load_ps(lut[p[1]]) : _mm256_setzero_ps();
    for (int r = 0; r < RB; ++r) {
      const __m256 wr = _mm256_broadcast_ss(w + static_cast<int64_t>(r) * n_planes + 2 * n_out + k);
      a[r] = _mm256_fmadd_ps(m0, wr, a[r]);
      b[r] = _mm256_fmadd_ps(m1, wr, b[r]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
  for (int r = 0; r < RB; ++r) {
    _mm256_storeu_ps(lg + r * ld, _mm256_mul_ps(a[r], sc));
    if (two) _mm256_storeu_ps(lg + r * ld + 8, _mm256_mul_ps(b[r], sc));
  }
}

template <int RB>
VLKV_S1_AVX2 void mixk_rows_block(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                                  const float* base, float scale, float* lg, int64_t ld) {
  const int stride = group / 8;
  for (int t0 = 0; t0 < group; t0 += 16)
    mixk_rows_16<RB>(planes + t0 / 8, n_out, n_sign, stride, group - t0 >= 16, w, base, scale, lg + t0, ld);
}

}  // namespace

VLKV_S1_AVX2 void mixk_plane_scores_rows_avx2(const uint8_t* planes, int n_out, int n_sign, int group, const float* w,
                                              const float* base, int n_rows, float scale, float* lg, int64_t ld) {
  const int n_planes = 2 * n_out + n_sign;
  for_row_blocks(n_rows, [&]<int RB>(int r0) {
    mixk_rows_block<RB>(planes, n_out, n_sign, group, w + static_cast<int64_t>(r0) * n_planes, base + r0, scale,
                        lg + r0 * ld, ld);
  });
}

VLKV_S1_AVX2 void plane_scores_rows_avx2(const uint8_t* planes, int n_planes, int group, const float* w,
                                         const float* base, int n_rows, float scale, float* lg, int64_t ld) {
  mixk_plane_scores_rows_avx2(planes, 0, n_planes, group, w, base, n_rows, scale, lg, ld);
}

VLKV_S1_AVX2 void plane_sums_avx2(const uint8_t* planes, int n_planes, int group, const float* p, float* u) {
  alignas(32) uint32_t words[8];
  alignas(32) float res[8];
  for (int j0 = 0; j0 < n_planes; j0 += 8) {
    const int nj = n_planes - j0 < 8 ? n_planes - j0 : 8;
    __m256 u0 = _mm256_setzero_ps(), u1 = u0;
    for (int t0 = 0; t0 < group; t0 += 32) {
      __m256i wv;
      if (group == 32 && nj == 8) {  // the planes are the words: one load
        wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(planes + 4 * static_cast<int64_t>(j0)));
      } else {
        for (int i = 0; i < 8; ++i) words[i] = i < nj ? plane_word(planes, group, j0 + i, t0) : 0u;
        wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(words));
      }
      const int nt = group - t0 < 32 ? group - t0 : 32;
      int t = 0;
      for (; t + 2 <= nt; t += 2) {
        const __m256i b0 = _mm256_set1_epi32(static_cast<int>(1u << t));
        const __m256i b1 = _mm256_set1_epi32(static_cast<int>(1u << (t + 1)));
        const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(wv, b0), b0));
        const __m256 m1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(wv, b1), b1));
        u0 = _mm256_add_ps(u0, _mm256_and_ps(m0, _mm256_broadcast_ss(p + t0 + t)));
        u1 = _mm256_add_ps(u1, _mm256_and_ps(m1, _mm256_broadcast_ss(p + t0 + t + 1)));
      }
      for (; t < nt; ++t) {
        const __m256i b0 = _mm256_set1_epi32(static_cast<int>(1u << t));
        const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(wv, b0), b0));
        u0 = _mm256_add_ps(u0, _mm256_and_ps(m0, _mm256_broadcast_ss(p + t0 + t)));
      }
    }
    _mm256_store_ps(res, _mm256_add_ps(u0, u1));
    for (int i = 0; i < nj; ++i) u[j0 + i] = res[i];
  }
}

VLKV_S1_AVX2 void load_f16_row_f16c(const uint8_t* p, int n, float* out) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))));
  for (; i < n; ++i) out[i] = load_f16(p + 2 * i);
}

#undef VLKV_S1_AVX2

}  // namespace vlkv::sign1
