// The scalar reference of q8_0_gemm.h (the table's fallback and the SIMD variants' test
// reference: integer block sums are exact and std::fma rounds once, so they agree bit for bit).
#include "quant/q8_0_gemm.h"

#include <cmath>

#include "base/simd_dispatch.h"
#include "quant/q8_0_lanes.h"

namespace vlkv::quant {
namespace {

void tile_scalar(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  const int groups = w.split ? 2 : 1;
  const int k_per_group = 8 / groups;  // dwords of codes per scale group
  for (int i = 0; i < w.n_rows; ++i) {
    const uint8_t* row = w.w + i * w.row_bytes + w.code_offset;
    for (int l = 0; l < kGemmPanelRows; ++l) {
      float a = acc[i * kGemmPanelRows + l];
      for (int64_t b = 0; b < n_blocks; ++b) {
        const auto* wq = reinterpret_cast<const int8_t*>(row + b * w.block_stride);
        const float dx = x.d[b * kGemmPanelRows + l];
        for (int g = 0; g < groups; ++g) {
          int32_t s = -w.bias[i * w.ld + b * groups + g];
          for (int k = g * k_per_group; k < (g + 1) * k_per_group; ++k) {
            const uint32_t x4 = x.codes[(b * 8 + k) * kGemmPanelRows + l];
            for (int j = 0; j < 4; ++j) s += static_cast<int32_t>((x4 >> (8 * j)) & 0xFF) * wq[4 * k + j];
          }
          a = std::fma(static_cast<float>(s), w.dw[i * w.ld + b * groups + g] * dx, a);
        }
        if (w.offset) a = std::fma(w.offset[i * w.ld_offset + b], x.xsum_d[b * kGemmPanelRows + l], a);
      }
      acc[i * kGemmPanelRows + l] = a;
    }
  }
}

void block_terms_scalar(const uint8_t* blocks, int64_t row_bytes, int n_rows, int64_t n_blocks, int32_t* bias,
                        float* dw, int64_t ld) {
  for (int i = 0; i < n_rows; ++i)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* blk = blocks + i * row_bytes + b * q8lanes::kBytes;
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += static_cast<int8_t>(blk[2 + j]);
      bias[i * ld + b] = 128 * s;
      dw[i * ld + b] = load_half(blk);
    }
}

}  // namespace

const Q8_0GemmKernels kQ8_0GemmScalar = {tile_scalar, block_terms_scalar};

const Q8_0GemmKernels& q8_0_gemm_kernels() {
  static const SimdTable<Q8_0GemmKernels> table(
      VLKV_SIMD_VARIANTS(&kQ8_0GemmScalar, kQ8_0Gemm, avx2, avx2_vnni, avx512_vnni, neon, dotprod));
  return table.get();
}

}  // namespace vlkv::quant
