// The plain NEON variant of IntTileKernels (int_kernels.h): int_tile_kernels_arm.h's kernels
// with smull + sadalp dots (ARMv8.0: Cortex-A72, Raspberry Pi 4).
#include "kv/codecs/int_tile_kernels_arm.h"

namespace vlkv::intk {
const IntTileKernels kIntTileKernelsNeon = tile_kernels<dots8::NeonDot>();
}  // namespace vlkv::intk
