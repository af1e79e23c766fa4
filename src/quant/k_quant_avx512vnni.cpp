// The AVX-512 VNNI tier (vpdpbusd on 512-bit vectors) of the K-quant 8-bit kernels: the
// strided matvec of k_strided.h and the packed-layout matvec of k_packed.h, for Q4_K, Q5_K, Q6_K.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/simd_dispatch.h"
#include "quant/k_strided.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI)
#include "quant/k_strided_avx512.h"
#include "quant/k_packed_avx512.h"

namespace vlkv::quant::kstrided {
template <KFormat F>
void strided_avx512vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  strided_512<F>(base, stride, n_rows, x, n, out);
}
template void strided_avx512vnni<KFormat::kQ4_K>(const uint8_t*, int64_t, int, const Q8Activations&, int64_t, float*);
template void strided_avx512vnni<KFormat::kQ5_K>(const uint8_t*, int64_t, int, const Q8Activations&, int64_t, float*);
template void strided_avx512vnni<KFormat::kQ6_K>(const uint8_t*, int64_t, int, const Q8Activations&, int64_t, float*);
template <KFormat F>
void packed8_avx512vnni(const void* group, const Q8Activations& x, int64_t n, float* out) {
  packed8<U512, F>(group, x, n, out);
}
template void packed8_avx512vnni<KFormat::kQ4_K>(const void*, const Q8Activations&, int64_t, float*);
template void packed8_avx512vnni<KFormat::kQ5_K>(const void*, const Q8Activations&, int64_t, float*);
template void packed8_avx512vnni<KFormat::kQ6_K>(const void*, const Q8Activations&, int64_t, float*);
}  // namespace vlkv::quant::kstrided
VLKV_TARGET_END
