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

void wht_row(float* x, int d) {
  for (int i = 0; i < d; i += 8) _mm256_storeu_ps(x + i, butterflies8(_mm256_loadu_ps(x + i)));
  for (int h = 8; h < d; h *= 2)
    for (int i = 0; i < d; i += 2 * h)
      for (int j = i; j < i + h; j += 8) {
        const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + h);
        _mm256_storeu_ps(x + j, _mm256_add_ps(a, b));
        _mm256_storeu_ps(x + j + h, _mm256_sub_ps(a, b));
      }
  const __m256 s = _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(d)));
  for (int i = 0; i < d; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
}

void wht_rows_avx2(float* x, int64_t n, int d) {
  if (d < 8) {  // below one vector: the scalar reference
    for (int64_t r = 0; r < n; ++r) wht(x + r * d, d);
    return;
  }
  for (int64_t r = 0; r < n; ++r) wht_row(x + r * d, d);
}

}  // namespace

const WhtKernels kWhtKernelsAvx2{wht_rows_avx2};

}  // namespace vlkv
VLKV_TARGET_END
