// Q5_K's ARM64 kernels (scale_min_k.cpp has the layout and the reference): its block decoder for
// the NEON loops of simd_blocks_arm.h (q5_k_x86.cpp's decoder on 16-byte vectors).
#include "quant/block_layouts.h"
#include "quant/simd_blocks_arm.h"

namespace vlkv::quant {
namespace {

struct Traits : Q5_KLayout {
  static void decode(const uint8_t* p, Group32Arm* g) {
    const float d = load_half(p), dmin = load_half(p + 2);
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    const uint8x16_t qh[2] = {vld1q_u8(p + 16), vld1q_u8(p + 32)};  // bit j of byte l: code l of sub-block j
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, p + 4, &sc, &m);
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t v = vld1q_u8(p + 48 + 32 * (j / 2) + 16 * h);
        const uint8x16_t lo = j % 2 == 0 ? vandq_u8(v, m4) : vshrq_n_u8(v, 4);
        const uint8x16_t hbit = vandq_u8(vshlq_u8(qh[h], vdupq_n_s8(static_cast<int8_t>(-j))), one);
        g[j].q[h] = vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hbit, 4)));
      }
      g[j].s0 = g[j].s1 = d * sc;
      g[j].b0 = g[j].b1 = -(dmin * m);
    }
  }
};

}  // namespace

const FormatKernels kQ5_KNeon = neon_variant<Traits>();
const FormatKernels kQ5_KDotprod = dotprod_variant<Traits>();

}  // namespace vlkv::quant
