// The ARM64 kernels of Q4_0, Q4_1, Q5_0, Q5_1 (legacy_blocks.cpp has the references): one
// block decoder for the NEON loops of simd_blocks_arm.h.
#include "quant/block_layouts.h"
#include "quant/simd_blocks_arm.h"

namespace vlkv::quant {
namespace {

template <class L>
struct Traits : L {
  static void decode(const uint8_t* p, Group32Arm* g) {
    const uint8x16_t v = vld1q_u8(p + L::kQsOffset);
    uint8x16_t lo = vandq_u8(v, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(v, 4);
    if constexpr (L::kBits == 5) {
      const uint32_t qh = load_u32(p + L::kQhOffset);
      lo = vorrq_u8(lo, bits_to_0x10(qh, 0));
      hi = vorrq_u8(hi, bits_to_0x10(qh, 1));
    }
    if constexpr (L::kBias) {
      g->q[0] = vreinterpretq_s8_u8(lo);
      g->q[1] = vreinterpretq_s8_u8(hi);
    } else {
      g->q[0] = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(L::kZero));
      g->q[1] = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(L::kZero));
    }
    g->s0 = g->s1 = load_half(p);
    g->b0 = g->b1 = L::kBias ? load_half(p + 2) : 0.0f;
  }
};

}  // namespace

#define VLKV_LEGACY_ARM(F, L)                                   \
  const FormatKernels F##Neon = neon_variant<Traits<L>>();      \
  const FormatKernels F##Dotprod = dotprod_variant<Traits<L>>();
VLKV_LEGACY_ARM(kQ4_0, Q4_0Layout)
VLKV_LEGACY_ARM(kQ4_1, Q4_1Layout)
VLKV_LEGACY_ARM(kQ5_0, Q5_0Layout)
VLKV_LEGACY_ARM(kQ5_1, Q5_1Layout)
#undef VLKV_LEGACY_ARM

}  // namespace vlkv::quant
