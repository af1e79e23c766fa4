#include "kv/codecs/float_kernels.h"

#include "base/simd_dispatch.h"

namespace vlkv::float_kernels {

const FloatKernels& float_kernels_table() {
  static const FloatKernels kScalar{scores_scalar<float>, scores_scalar<uint16_t>, accumulate_scalar<float>,
                                    accumulate_scalar<uint16_t>};
  static const SimdTable<FloatKernels> table(VLKV_SIMD_VARIANTS(&kScalar, kFloatKernels, avx2, avx512, neon));
  return table.get();
}

}  // namespace vlkv::float_kernels
