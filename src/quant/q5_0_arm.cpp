// Q5_0's ARM64 kernels (q5_0.cpp has the layout and the reference): its block decoder for
// the NEON loops of simd_blocks_arm.h.
#include "quant/block_layouts.h"
#include "quant/simd_blocks_arm.h"

namespace vlkv::quant {
namespace {

struct Traits : Q5_0Layout {
  static void decode(const uint8_t* p, Group32Arm* g) {
    const uint8x16_t v = vld1q_u8(p + 6);
    const uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(v, 4);
    const uint32_t qh = load_u32(p + 2);
    g->q[0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, bits_to_0x10(qh, 0))), vdupq_n_s8(16));
    g->q[1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, bits_to_0x10(qh, 1))), vdupq_n_s8(16));
    g->s0 = g->s1 = load_half(p);
    g->b0 = g->b1 = 0.0f;
  }
};

}  // namespace

const FormatKernels kQ5_0Neon = neon_variant<Traits>();
const FormatKernels kQ5_0Dotprod = dotprod_variant<Traits>();

}  // namespace vlkv::quant
