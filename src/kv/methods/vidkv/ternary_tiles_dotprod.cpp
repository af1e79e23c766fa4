// The dotprod accumulate of the ternary codec's tiled blocks (ternary_tiles_arm.h with sdot by
// element). Every header is included above the target region but the kernels' own.
#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/ternary_tiles.h"

VLKV_TARGET_BEGIN(VLKV_ISA_DOTPROD)
#include "kv/methods/vidkv/ternary_tiles_arm.h"

namespace vlkv::ternt {
bool accum_tiles_dotprod(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out) {
  return accum_tiles_arm<dots8::DotprodDot>(p, codes, o, sig, out);
}
}  // namespace vlkv::ternt
VLKV_TARGET_END
