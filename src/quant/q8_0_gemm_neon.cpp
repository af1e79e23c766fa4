// The plain NEON (ARMv8.0) variant of the q8_0_gemm.h kernel: q8_0_gemm_arm.h with smull +
// sadalp for the 8-bit dots.
#include <arm_neon.h>

#include "quant/q8_0_gemm_arm.h"

namespace vlkv::quant {
const Q8_0GemmKernels kQ8_0GemmNeon = {tile_arm<dots8::NeonDot>, block_terms_arm};
}  // namespace vlkv::quant
