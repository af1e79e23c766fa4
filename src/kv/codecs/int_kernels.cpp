#include "kv/codecs/int_kernels.h"

#include "base/simd_dispatch.h"

namespace vlkv::intk {

const IntTileKernels& int_tile_kernels() {
  static const IntTileKernels kScalar{};  // no integer kernels: IntCodec dequantizes
  static const SimdTable<IntTileKernels> table(&kScalar, &kIntTileKernelsAvx2, &kIntTileKernelsAvx2Vnni, nullptr,
                                               &kIntTileKernelsAvx512Vnni);
  return table.get();
}

}  // namespace vlkv::intk
