// F16's x86 row kernels (float_formats.cpp has the reference): how halves widen, for float_rows_x86.h.
#include "quant/float_rows_x86.h"

namespace vlkv::quant {
namespace {

// How halves widen, for float_rows_x86.h.
struct F16 {
  static float to_f32(uint16_t h) { return fp16_to_fp32(h); }
  VLKV_TARGET_AVX2 static __m256 widen8(__m128i h) { return _mm256_cvtph_ps(h); }
  VLKV_TARGET_AVX512 static __m512 widen16(__m256i h) { return _mm512_cvtph_ps(h); }
};

}  // namespace

const FormatKernels kF16Avx2 = float_rows::avx2_variant<float_rows::HalfRows<F16>>();
const FormatKernels kF16Avx512 = float_rows::avx512_variant<float_rows::HalfRows<F16>>();

}  // namespace vlkv::quant
