// Q4_1's ARM64 kernels (q4_1.cpp has the layout and the reference): its block decoder for
// the NEON loops of simd_blocks_arm.h.
#include "quant/block_layouts.h"
#include "quant/simd_blocks_arm.h"

namespace vlkv::quant {
namespace {

struct Traits : Q4_1Layout {
  static void decode(const uint8_t* p, Group32Arm* g) {
    const uint8x16_t v = vld1q_u8(p + 4);
    const uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(v, 4);
    g->q[0] = vreinterpretq_s8_u8(lo);
    g->q[1] = vreinterpretq_s8_u8(hi);
    g->s0 = g->s1 = load_half(p);
    g->b0 = g->b1 = load_half(p + 2);
  }
};

}  // namespace

const FormatKernels kQ4_1Neon = neon_variant<Traits>();
const FormatKernels kQ4_1Dotprod = dotprod_variant<Traits>();

}  // namespace vlkv::quant
