// The plain AVX2 (vpmaddubsw) variant of the k_strided.h kernels, in k_strided_x86.h.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/simd_dispatch.h"
#include "quant/k_strided.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
#include "quant/k_strided_x86.h"

namespace vlkv::quant::kstrided {
template <KFormat F>
void strided_avx2(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  strided<Madd::kAvx2, F>(base, stride, n_rows, x, n, out);
}
template void strided_avx2<KFormat::kQ4_K>(const uint8_t*, int64_t, int, const Q8Activations&, int64_t, float*);
template void strided_avx2<KFormat::kQ5_K>(const uint8_t*, int64_t, int, const Q8Activations&, int64_t, float*);
template void strided_avx2<KFormat::kQ6_K>(const uint8_t*, int64_t, int, const Q8Activations&, int64_t, float*);
}  // namespace vlkv::quant::kstrided
VLKV_TARGET_END
