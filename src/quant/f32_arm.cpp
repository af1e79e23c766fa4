// F32's NEON dot (float_formats.cpp has the reference; dequantize is a copy at every tier).
#include "quant/half_rows_arm.h"

namespace vlkv::quant {
namespace {

struct F32 {
  using Elem = float;
  static float to_f32(float f) { return f; }
  static float32x4_t widen4(const float* f) { return vld1q_f32(f); }
};

}  // namespace

const FormatKernels kF32Neon = half_rows::neon_variant<F32>();

}  // namespace vlkv::quant
