// The horizontal step of the strided (lanes = weight rows) 8-bit kernels: 8 vectors of 8
// int32 partial sums, one per weight row, folded into one vector of the 8 rows' sums (exact).
// Included only inside a VLKV_TARGET_BEGIN region (AVX2 or above), as the kernel headers that use it.
#pragma once

#include <immintrin.h>

namespace vlkv::quant {
namespace {

// The same for the two halves of each row's vector apart (its 128-bit lanes: bytes 0..15 and
// 16..31 of a 32-byte block, Q6_K's two scale groups): half0 + half1 = reduce_rows8.
inline void reduce_rows8_halves(const __m256i* v, __m256i& half0, __m256i& half1) {
  __m256i u[4], w[2];
  for (int k = 0; k < 4; ++k)  // per 128-bit lane: rows 2k, 2k+1, two partial sums each
    u[k] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  for (int k = 0; k < 2; ++k)  // per 128-bit lane: rows 4k..4k+3, that lane's sum
    w[k] = _mm256_add_epi32(_mm256_unpacklo_epi64(u[2 * k], u[2 * k + 1]), _mm256_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
  half0 = _mm256_permute2x128_si256(w[0], w[1], 0x20);
  half1 = _mm256_permute2x128_si256(w[0], w[1], 0x31);
}

inline __m256i reduce_rows8(const __m256i* v) {
  __m256i half0, half1;
  reduce_rows8_halves(v, half0, half1);
  return _mm256_add_epi32(half0, half1);
}

}  // namespace
}  // namespace vlkv::quant
