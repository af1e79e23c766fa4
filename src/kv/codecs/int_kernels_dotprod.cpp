// The dotprod variant of IntTileKernels (int_kernels.h): int_tile_kernels_arm.h's kernels with
// sdot by element (ARMv8.2 dotprod: Neoverse N1, Cortex-A76, Raspberry Pi 5). Every header is
// included above the target region but the kernels' own (base/simd_dispatch.h says why).
#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/simd_dispatch.h"
#include "kv/codec.h"
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_tiles.h"

VLKV_TARGET_BEGIN(VLKV_ISA_DOTPROD)
#include "kv/codecs/int_tile_kernels_arm.h"

namespace vlkv::intk {
const IntTileKernels kIntTileKernelsDotprod = tile_kernels<dots8::DotprodDot>();
}  // namespace vlkv::intk
VLKV_TARGET_END
