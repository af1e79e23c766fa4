// The AVX-512 VNNI (one 512-bit vpdpbusd per unit) variant of the packed-layout kernels of k_packed_x86.h.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/simd_dispatch.h"
#include "quant/k_strided.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI)
#include "quant/k_packed_avx512.h"

namespace vlkv::quant::kstrided {
template <KFormat F>
void packed8_avx512vnni(const void* group, const Q8Activations& x, int64_t n, float* out) {
  packed8<U512, F>(group, x, n, out);
}
template void packed8_avx512vnni<KFormat::kQ4_K>(const void*, const Q8Activations&, int64_t, float*);
template void packed8_avx512vnni<KFormat::kQ5_K>(const void*, const Q8Activations&, int64_t, float*);
template void packed8_avx512vnni<KFormat::kQ6_K>(const void*, const Q8Activations&, int64_t, float*);
}  // namespace vlkv::quant::kstrided
VLKV_TARGET_END
