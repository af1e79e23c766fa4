// Q4_K's ARM64 kernels (scale_min_k.cpp has the layout and the reference): its block decoder for
// the NEON loops of simd_blocks_arm.h (q4_k_x86.cpp's decoder on 16-byte vectors).
#include "quant/block_layouts.h"
#include "quant/simd_blocks_arm.h"

namespace vlkv::quant {
namespace {

struct Traits : Q4_KLayout {
  static void decode(const uint8_t* p, Group32Arm* g) {
    const float d = load_half(p), dmin = load_half(p + 2);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int j = 0; j < 8; ++j) {  // sub-blocks 2i and 2i + 1: low and high nibbles of 32 bytes
      uint8_t sc, m;
      unpack_scale_min_k4(j, p + 4, &sc, &m);
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t v = vld1q_u8(p + 16 + 32 * (j / 2) + 16 * h);
        g[j].q[h] = vreinterpretq_s8_u8(j % 2 == 0 ? vandq_u8(v, m4) : vshrq_n_u8(v, 4));
      }
      g[j].s0 = g[j].s1 = d * sc;
      g[j].b0 = g[j].b1 = -(dmin * m);
    }
  }
};

}  // namespace

const FormatKernels kQ4_KNeon = neon_variant<Traits>();
const FormatKernels kQ4_KDotprod = dotprod_variant<Traits>();

}  // namespace vlkv::quant
