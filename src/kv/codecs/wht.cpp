#include "kv/codecs/wht.h"

#include "base/simd_dispatch.h"
#include "kv/codecs/wht_kernels.h"

namespace vlkv {
namespace {

void wht_rows_scalar(float* x, int64_t n, int d) {
  for (int64_t r = 0; r < n; ++r) wht(x + r * d, d);
}

}  // namespace

void wht_rows(float* x, int64_t n, int d) {
  static const WhtKernels kScalar{wht_rows_scalar};
  static const SimdTable<WhtKernels> table(VLKV_SIMD_VARIANTS(&kScalar, kWhtKernels, avx2, neon));
  table.get().rows(x, n, d);
}

}  // namespace vlkv
