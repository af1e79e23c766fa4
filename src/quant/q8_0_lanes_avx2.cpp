// The plain AVX2 (vpmaddubsw) variant of the q8_0_lanes.h kernels, in q8_0_lanes_x86.h.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "base/simd_dispatch.h"
#include "quant/q8_0_lanes.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
#include "quant/q8_0_lanes_x86.h"

namespace vlkv::quant::q8lanes {
void strided_avx2(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  strided_256<false>(base, stride, n_rows, x, n, out);
}
void lanes_avx2(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  lanes_256<false>(rows, n_rows, x, n, out);
}
}  // namespace vlkv::quant::q8lanes
VLKV_TARGET_END
