// The AVX2 (vpmaddubsw) variant of the q8_0_gemm.h kernel, in q8_0_gemm_x86.h.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "base/simd_dispatch.h"
#include "quant/q8_0_gemm.h"
#include "quant/q8_0_lanes.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
#include "quant/q8_0_gemm_x86.h"

namespace vlkv::quant {
const Q8_0GemmKernels kQ8_0GemmAvx2 = {tile_256<false>, block_terms_256};
}  // namespace vlkv::quant
VLKV_TARGET_END
