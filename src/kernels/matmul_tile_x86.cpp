// AVX2 and AVX-512 f32 micro-kernels for prefill matmul (matmul_tile.h), one template per
// tier, instantiated for every tile shape up to the tier's maximum.
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kernels/matmul_tile.h"

namespace vlkv {
namespace {

VLKV_TARGET(VLKV_ISA_AVX2) inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int R, int T>
VLKV_TARGET(VLKV_ISA_AVX2) void tile_avx2(const float* w, int64_t ldw, const float* x,
                                                    int64_t ldx, int64_t k, float* y,
                                                    int64_t ldy) {
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = _mm256_loadu_ps(w + r * ldw + i);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + i);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float sum = hsum256(acc[r][t]);
      for (int64_t j = i; j < k; ++j) sum += w[r * ldw + j] * x[t * ldx + j];
      y[t * ldy + r] += sum;
    }
  }
}

// Through memory, not _mm512_reduce_add_ps or lane shuffles: GCC 12 warns (falsely) about
// their uninitialized pass-through operand. Runs once per tile, so the cost does not matter.
VLKV_TARGET(VLKV_ISA_AVX512) inline float hsum512(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return hsum256(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}

template <int R, int T>
VLKV_TARGET(VLKV_ISA_AVX512) void tile_avx512(
    const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k, float* y, int64_t ldy) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_ps(w + r * ldw + i);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * ldx + i);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < k) {  // masked tail: lanes past k load as zero
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w + r * ldw + i);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + i);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] += hsum512(acc[r][t]);
}

template <int R, int T> struct Avx2K { static constexpr TileFn fn = &tile_avx2<R, T>; };
template <int R, int T> struct Avx512K { static constexpr TileFn fn = &tile_avx512<R, T>; };

// Tile shapes: accumulators + one row of weights + one token must fit the register file
// (16 ymm for AVX2: 3x4 = 12 + 3 + 1; 32 zmm for AVX-512: 4x6 = 24 + 4 + 1).
constexpr int kAvx2Rows = 3, kAvx2Tokens = 4;
constexpr int kAvx512Rows = 4, kAvx512Tokens = 6;

}  // namespace

const TileKernels kTileKernelsAvx2 = make_tile_table<kAvx2Rows, kAvx2Tokens, Avx2K>();
const TileKernels kTileKernelsAvx512 = make_tile_table<kAvx512Rows, kAvx512Tokens, Avx512K>();

}  // namespace vlkv
