// The dotprod (ARMv8.2) variant of the q8_0_gemm.h kernel: q8_0_gemm_arm.h with sdot by
// element. Every header is included above the target region but the kernel's own
// (base/simd_dispatch.h says why).
#include <arm_neon.h>

#include <algorithm>
#include <cstdint>

#include "base/simd_dispatch.h"
#include "quant/q8_0_gemm.h"
#include "quant/q8_0_lanes.h"
#include "quant/quant_internal.h"

VLKV_TARGET_BEGIN(VLKV_ISA_DOTPROD)
#include "quant/q8_0_gemm_arm.h"

namespace vlkv::quant {
const Q8_0GemmKernels kQ8_0GemmDotprod = {tile_arm<dots8::DotprodDot>, block_terms_arm};
}  // namespace vlkv::quant
VLKV_TARGET_END
