// F16's NEON row kernels (float_formats.cpp has the reference): fcvtl widens 4 halves exactly.
#include "quant/half_rows_arm.h"

namespace vlkv::quant {
namespace {

struct F16 {
  using Elem = uint16_t;
  static float to_f32(uint16_t h) { return fp16_to_fp32(h); }
  static float32x4_t widen4(const uint16_t* h) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))); }
};

}  // namespace

const FormatKernels kF16Neon = half_rows::neon_variant<F16>();

}  // namespace vlkv::quant
