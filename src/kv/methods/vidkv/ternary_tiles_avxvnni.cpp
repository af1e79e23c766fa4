// AVX-VNNI (Alder Lake, Zen 4: 256-bit vpdpbusd) accumulate of the ternary codec's tiled
// blocks: the AVX2 kernel with each maddubs + add replaced by one vpdpbusd into s32.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/ternary_tiles.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2_VNNI)
#include "kv/methods/vidkv/ternary_tiles_x86.h"

namespace vlkv::ternt {
namespace {

struct DotVnni {
  static __m256i add(__m256i acc, __m256i p, __m256i codes) { return _mm256_dpbusd_avx_epi32(acc, p, codes); }
  static __m256i finish(__m256i acc) { return acc; }
};

}  // namespace

bool accum_tiles_avxvnni(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out) {
  return accum_tiles_impl<DotVnni>(p, codes, o, sig, out);
}

}  // namespace vlkv::ternt
VLKV_TARGET_END
