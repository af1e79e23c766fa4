// The AVX-512 VNNI variant of IntTileKernels (int_kernels.h), kernels in int_tile_kernels_avx512.h.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/simd_dispatch.h"
#include "kv/codec.h"
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_tiles.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI)
#include "kv/codecs/int_tile_kernels_avx512.h"

namespace vlkv::intk {
const IntTileKernels kIntTileKernelsAvx512Vnni = tilek::tile_kernels<tilek::Avx512Vnni>();
}  // namespace vlkv::intk
VLKV_TARGET_END
