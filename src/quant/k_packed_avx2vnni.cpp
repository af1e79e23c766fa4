// The AVX-VNNI (256-bit vpdpbusd halves) variant of the packed-layout kernels of k_packed_x86.h.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/simd_dispatch.h"
#include "quant/k_strided.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2_VNNI)
#include "quant/k_packed_x86.h"

namespace vlkv::quant::kstrided {
template <KFormat F>
void packed8_avx2vnni(const void* group, const Q8Activations& x, int64_t n, float* out) {
  packed8<U256<Madd::kAvxVnni>, F>(group, x, n, out);
}
template void packed8_avx2vnni<KFormat::kQ4_K>(const void*, const Q8Activations&, int64_t, float*);
template void packed8_avx2vnni<KFormat::kQ5_K>(const void*, const Q8Activations&, int64_t, float*);
template void packed8_avx2vnni<KFormat::kQ6_K>(const void*, const Q8Activations&, int64_t, float*);
}  // namespace vlkv::quant::kstrided
VLKV_TARGET_END
