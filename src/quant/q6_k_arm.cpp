// Q6_K's ARM64 kernels (q6_k.cpp has the layout and the reference): its block decoder for
// the NEON loops of simd_blocks_arm.h (q6_k_x86.cpp's decoder on 16-byte vectors).
#include "quant/block_layouts.h"
#include "quant/simd_blocks_arm.h"

namespace vlkv::quant {
namespace {

struct Traits : Q6_KLayout {
  static void decode(const uint8_t* p, Group32Arm* g) {
    const float d = load_half(p + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);
    for (int j = 0; j < 8; ++j) {  // j = 4 * half + quarter
      const int half = j / 4, k = j % 4;
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t ql = vld1q_u8(p + 64 * half + 32 * (k & 1) + 16 * h);
        const uint8x16_t qh = vld1q_u8(p + 128 + 32 * half + 16 * h);
        const uint8x16_t lo = k < 2 ? vandq_u8(ql, m4) : vshrq_n_u8(ql, 4);
        const uint8x16_t hi = vandq_u8(vshlq_u8(qh, vdupq_n_s8(static_cast<int8_t>(-2 * k))), m2);
        g[j].q[h] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
      }
      g[j].s0 = d * static_cast<float>(sc[2 * j]);
      g[j].s1 = d * static_cast<float>(sc[2 * j + 1]);
      g[j].b0 = g[j].b1 = 0.0f;
    }
  }
};

}  // namespace

const FormatKernels kQ6_KNeon = neon_variant<Traits>();
const FormatKernels kQ6_KDotprod = dotprod_variant<Traits>();

}  // namespace vlkv::quant
