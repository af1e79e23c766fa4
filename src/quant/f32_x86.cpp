// F32's x86 dots (float_formats.cpp has the reference; dequantize is a copy at every tier):
// the loops of float_rows_x86.h on plain float loads.
#include <cstring>

#include "quant/float_rows_x86.h"

namespace vlkv::quant {
namespace {

void copy_row(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }

struct F32 {
  using Elem = float;
  static float to_f32(float f) { return f; }
  VLKV_TARGET_AVX2 static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  VLKV_TARGET_AVX512 static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  VLKV_TARGET_AVX512 static __m512 load16_masked(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
};

}  // namespace

const FormatKernels kF32Avx2 = {copy_row, float_rows::avx2::dot_row<F32>};
const FormatKernels kF32Avx512 = {copy_row, float_rows::avx512::dot_row<F32>};

}  // namespace vlkv::quant
