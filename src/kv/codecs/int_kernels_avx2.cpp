// The AVX2 (+FMA, F16C): vpmaddubsw + vpmaddwd dots variant of IntTileKernels (int_kernels.h), kernels in int_tile_kernels_avx2.h.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/simd_dispatch.h"
#include "kv/codec.h"
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_tiles.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
#include "kv/codecs/int_tile_kernels_avx2.h"

namespace vlkv::intk {
const IntTileKernels kIntTileKernelsAvx2 = tile_kernels<Avx2Dots<false>>();
}  // namespace vlkv::intk
VLKV_TARGET_END
