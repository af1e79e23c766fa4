// The scalar reference of q8_0_gemm.h (the table's fallback and the SIMD variants' test
// reference: integer block sums are exact and std::fma rounds once, so they agree bit for bit).
#include "quant/q8_0_gemm.h"

#include <cmath>

#include "base/simd_dispatch.h"
#include "quant/q8_0_lanes.h"

namespace vlkv::quant {
namespace {

void tile_scalar(const GemmWeightRows& w, const uint32_t* codes, const float* d, int64_t n_blocks, float* acc) {
  for (int i = 0; i < w.n_rows; ++i) {
    const uint8_t* row = w.w + i * w.row_bytes;
    for (int l = 0; l < kGemmPanelRows; ++l) {
      float a = acc[i * kGemmPanelRows + l];
      for (int64_t b = 0; b < n_blocks; ++b) {
        const auto* wq = reinterpret_cast<const int8_t*>(row + b * q8lanes::kBytes + 2);
        int32_t s = -w.bias[i * w.ld + b];
        for (int k = 0; k < 8; ++k) {
          const uint32_t x4 = codes[(b * 8 + k) * kGemmPanelRows + l];
          for (int j = 0; j < 4; ++j) s += static_cast<int32_t>((x4 >> (8 * j)) & 0xFF) * wq[4 * k + j];
        }
        a = std::fma(static_cast<float>(s), w.dw[i * w.ld + b] * d[b * kGemmPanelRows + l], a);
      }
      acc[i * kGemmPanelRows + l] = a;
    }
  }
}

}  // namespace

const Q8_0GemmKernels kQ8_0GemmScalar = {tile_scalar};

const Q8_0GemmKernels& q8_0_gemm_kernels() {
  static const SimdTable<Q8_0GemmKernels> table(&kQ8_0GemmScalar, &kQ8_0GemmAvx2, &kQ8_0GemmAvx2Vnni, nullptr,
                                                &kQ8_0GemmAvx512Vnni);
  return table.get();
}

}  // namespace vlkv::quant
