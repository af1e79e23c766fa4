#include "kernels/f16_table_lookup.h"

#include "base/fp16.h"
#include "base/simd_dispatch.h"

namespace vlkv {

void f16_table_lookup_scalar(const float* table, const float* x, int64_t n, float* out, bool gelu_clamp) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (gelu_clamp && v <= -10.0f) {
      out[i] = 0.0f;
    } else if (gelu_clamp && v >= 10.0f) {
      out[i] = v;
    } else {
      out[i] = table[fp32_to_fp16(v)];
    }
  }
}

void f16_table_lookup(const float* table, const float* x, int64_t n, float* out, bool gelu_clamp) {
  static const F16TableLookupFn scalar = &f16_table_lookup_scalar;
  static const SimdTable<F16TableLookupFn> fns(VLKV_SIMD_VARIANTS(&scalar, kF16TableLookup, avx2, avx512));
  fns.get()(table, x, n, out, gelu_clamp);
}

}  // namespace vlkv
