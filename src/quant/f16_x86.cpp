// F16's x86 row kernels (f16.cpp has the reference): how halves widen, for half_rows_x86.h.
#include "quant/half_rows_x86.h"

namespace vlkv::quant {
namespace {

// How halves widen, for half_rows_x86.h.
struct F16 {
  static float to_f32(uint16_t h) { return fp16_to_fp32(h); }
  VLKV_TARGET_AVX2 static __m256 widen8(__m128i h) { return _mm256_cvtph_ps(h); }
  VLKV_TARGET_AVX512 static __m512 widen16(__m256i h) { return _mm512_cvtph_ps(h); }
};

}  // namespace

const FormatKernels kF16Avx2 = half_rows::avx2_variant<F16>();
const FormatKernels kF16Avx512 = half_rows::avx512_variant<F16>();

}  // namespace vlkv::quant
