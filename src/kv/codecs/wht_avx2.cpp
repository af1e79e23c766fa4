// AVX2 variant of the Walsh-Hadamard transform (wht_kernels.h): the butterflies of wht()
// in the same order on 8 lanes (strides 1, 2, 4 inside a vector by permute + blend,
// strides >= 8 between vectors), so every output is bit-identical to the scalar reference.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "base/simd_dispatch.h"
#include "kv/codecs/wht.h"
#include "kv/codecs/wht_kernels.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
namespace vlkv {
namespace {

// One vector's butterflies of stride 1, 2, 4: lane j pairs with j ^ h; the lower lane
// keeps a + b, the upper a - b (from the upper lane: partner - self).
inline __m256 butterflies8(__m256 x) {
  __m256 y = _mm256_permute_ps(x, 0xB1);  // swap neighbours
  x = _mm256_blend_ps(_mm256_add_ps(x, y), _mm256_sub_ps(y, x), 0xAA);
  y = _mm256_permute_ps(x, 0x4E);  // swap pairs
  x = _mm256_blend_ps(_mm256_add_ps(x, y), _mm256_sub_ps(y, x), 0xCC);
  y = _mm256_permute2f128_ps(x, x, 0x01);  // swap halves
  return _mm256_blend_ps(_mm256_add_ps(x, y), _mm256_sub_ps(y, x), 0xF0);
}

struct VecOps {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V load(const float* x) { return _mm256_loadu_ps(x); }
  static void store(float* x, V v) { _mm256_storeu_ps(x, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V splat(float f) { return _mm256_set1_ps(f); }
  static V butterflies(V x) { return butterflies8(x); }
};

#include "kv/codecs/wht_loops.inc"

}  // namespace

const WhtKernels kWhtKernelsAvx2{wht_rows_simd};

}  // namespace vlkv
VLKV_TARGET_END
