// BF16's x86 row kernels (float_formats.cpp has the reference): how halves widen, for float_rows_x86.h.
#include "quant/float_rows_x86.h"

namespace vlkv::quant {
namespace {

// How bfloat16 widens (shift into the top half of an f32), for float_rows_x86.h.
struct Bf16 {
  static float to_f32(uint16_t h) { return bf16_to_fp32(h); }
  VLKV_TARGET_AVX2 static __m256 widen8(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  VLKV_TARGET_AVX512 static __m512 widen16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

}  // namespace

const FormatKernels kBf16Avx2 = float_rows::avx2_variant<float_rows::HalfRows<Bf16>>();
const FormatKernels kBf16Avx512 = float_rows::avx512_variant<float_rows::HalfRows<Bf16>>();

}  // namespace vlkv::quant
