// BF16's NEON row kernels (float_formats.cpp has the reference): a bfloat16 is the top half of an f32.
#include "quant/half_rows_arm.h"

namespace vlkv::quant {
namespace {

struct Bf16 {
  using Elem = uint16_t;
  static float to_f32(uint16_t h) { return bf16_to_fp32(h); }
  static float32x4_t widen4(const uint16_t* h) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h), 16)); }
};

}  // namespace

const FormatKernels kBf16Neon = half_rows::neon_variant<Bf16>();

}  // namespace vlkv::quant
