#include "kv/codecs/int_kernels.h"

#include "base/simd_dispatch.h"

namespace vlkv::intk {

const IntTileKernels& int_tile_kernels() {
  static const IntTileKernels kScalar{};  // no integer kernels: IntCodec dequantizes
  static const SimdTable<IntTileKernels> table({.scalar = &kScalar,
                                                .avx2 = VLKV_X86(&kIntTileKernelsAvx2),
                                                .avx2_vnni = VLKV_X86(&kIntTileKernelsAvx2Vnni),
                                                .avx512_vnni = VLKV_X86(&kIntTileKernelsAvx512Vnni),
                                                .neon = VLKV_ARM(&kIntTileKernelsNeon),
                                                .dotprod = VLKV_ARM(&kIntTileKernelsDotprod)});
  return table.get();
}

}  // namespace vlkv::intk
