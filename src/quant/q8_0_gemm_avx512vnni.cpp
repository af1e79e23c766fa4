// AVX-512 VNNI kernel of q8_0_gemm.h: 8 weight rows x one panel (16 activation rows in the
// lanes of a zmm). Per (row, block): 8 vpdpbusd of the panel's codes with 4 weight bytes
// broadcast, started at -bias, then one convert and FMA per scale group (two for split
// blocks), and one FMA of the offset with the panel's block sums.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <cstdint>

#include "base/simd_dispatch.h"
#include "quant/q8_0_gemm.h"
#include "quant/q8_0_lanes.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI)
#include "quant/q8_0_gemm_x86.h"  // block_terms_256

namespace vlkv::quant {
namespace {

template <int R, bool kSplit, bool kOffset>
void tile_r(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  constexpr int kGroups = kSplit ? 2 : 1;
  __m512 a[R];
  for (int i = 0; i < R; ++i) a[i] = _mm512_loadu_ps(acc + i * kGemmPanelRows);
  const uint8_t* wbase = w.w + w.code_offset;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512i xv[8];
    for (int k = 0; k < 8; ++k) xv[k] = _mm512_loadu_si512(x.codes + (b * 8 + k) * kGemmPanelRows);
    const __m512 dx = _mm512_loadu_ps(x.d + b * kGemmPanelRows);
    __m512 xs;
    if constexpr (kOffset) xs = _mm512_loadu_ps(x.xsum_d + b * kGemmPanelRows);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const uint8_t* wb = wbase + i * w.row_bytes + b * w.block_stride;
#pragma GCC unroll 2
      for (int g = 0; g < kGroups; ++g) {
        __m512i s = _mm512_set1_epi32(-w.bias[i * w.ld + b * kGroups + g]);
#pragma GCC unroll 8
        for (int k = g * 8 / kGroups; k < (g + 1) * 8 / kGroups; ++k)
          s = _mm512_dpbusd_epi32(s, xv[k], _mm512_set1_epi32(static_cast<int32_t>(load_u32(wb + 4 * k))));
        a[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(_mm512_set1_ps(w.dw[i * w.ld + b * kGroups + g]), dx),
                               a[i]);
      }
      if constexpr (kOffset) a[i] = _mm512_fmadd_ps(_mm512_set1_ps(w.offset[i * w.ld_offset + b]), xs, a[i]);
    }
  }
  for (int i = 0; i < R; ++i) _mm512_storeu_ps(acc + i * kGemmPanelRows, a[i]);
}

template <bool kSplit, bool kOffset>
void tile_v(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  switch (w.n_rows) {
    case 8: return tile_r<8, kSplit, kOffset>(w, x, n_blocks, acc);
    case 7: return tile_r<7, kSplit, kOffset>(w, x, n_blocks, acc);
    case 6: return tile_r<6, kSplit, kOffset>(w, x, n_blocks, acc);
    case 5: return tile_r<5, kSplit, kOffset>(w, x, n_blocks, acc);
    case 4: return tile_r<4, kSplit, kOffset>(w, x, n_blocks, acc);
    case 3: return tile_r<3, kSplit, kOffset>(w, x, n_blocks, acc);
    case 2: return tile_r<2, kSplit, kOffset>(w, x, n_blocks, acc);
    default: return tile_r<1, kSplit, kOffset>(w, x, n_blocks, acc);
  }
}

void tile(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  if (w.split) return w.offset ? tile_v<true, true>(w, x, n_blocks, acc) : tile_v<true, false>(w, x, n_blocks, acc);
  return w.offset ? tile_v<false, true>(w, x, n_blocks, acc) : tile_v<false, false>(w, x, n_blocks, acc);
}

}  // namespace

const Q8_0GemmKernels kQ8_0GemmAvx512Vnni = {tile, block_terms_256};

}  // namespace vlkv::quant
VLKV_TARGET_END
