#include "kv/codecs/int_kernels.h"

#include "base/simd_dispatch.h"

namespace vlkv::intk {

const IntTileKernels& int_tile_kernels() {
  static const IntTileKernels kScalar{};  // no integer kernels: IntCodec dequantizes
  static const SimdTable<IntTileKernels> table(
      VLKV_SIMD_VARIANTS(&kScalar, kIntTileKernels, avx2, avx2_vnni, avx512_vnni, neon, dotprod));
  return table.get();
}

}  // namespace vlkv::intk
