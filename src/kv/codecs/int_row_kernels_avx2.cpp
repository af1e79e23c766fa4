// The AVX2 (+FMA, F16C) variant of IntRowKernels (int_row_kernels.h): 16 codes per step
// through two 8-lane FMAs. Every header is included above the target region
// (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/simd_dispatch.h"
#include "kv/codecs/int_row_kernels.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
#include "kv/codecs/int_unpack_x86.h"

namespace vlkv::intk {
namespace {

template <int B>
void dequantize_avx2(const IntRowMeta& m, int d, float* out) {
  for (int u = 0; u < d; u += 16) {
    const __m128i c = intq::unpack16<B>(m.codes + u * B / 8);
    const __m256 c0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c));
    const __m256 c1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(c, 8)));
    __m256 s0, s1, z0, z1;
    if (m.scale_c) {
      s0 = _mm256_loadu_ps(m.scale_c + u);
      s1 = _mm256_loadu_ps(m.scale_c + u + 8);
      z0 = _mm256_loadu_ps(m.min_c + u);
      z1 = _mm256_loadu_ps(m.min_c + u + 8);
    } else {
      uint16_t sh, zh;
      std::memcpy(&sh, m.scale_h + 2 * (u / m.g), 2);
      std::memcpy(&zh, m.min_h + 2 * (u / m.g), 2);
      s0 = s1 = _mm256_set1_ps(_cvtsh_ss(sh));
      z0 = z1 = _mm256_set1_ps(_cvtsh_ss(zh));
    }
    _mm256_storeu_ps(out + u, _mm256_fmadd_ps(c0, s0, z0));
    _mm256_storeu_ps(out + u + 8, _mm256_fmadd_ps(c1, s1, z1));
  }
}

}  // namespace

const IntRowKernels kIntRowKernelsAvx2{
    .dequantize = {dequantize_avx2<2>, dequantize_avx2<3>, dequantize_avx2<4>, dequantize_avx2<8>},
    .halves_to_floats = intq::halves_to_floats_f16c,
    .scores = {}};

}  // namespace vlkv::intk
VLKV_TARGET_END
