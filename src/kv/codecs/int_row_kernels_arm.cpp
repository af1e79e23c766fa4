// The NEON variant of IntRowKernels (int_row_kernels.h): dequantize 16 codes per step (one
// packed unit to 16 bytes in code order, int_pack.h, then fma(code, scale, min) per element:
// the scalar reference's values) and f16 metadata with fcvtl. No scores on the codes in place
// (the x86 ones are AVX-512 VNNI gathers): the codec dequantizes, as at the AVX2 tier.
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "base/simd_dispatch.h"
#include "kv/codecs/int_row_kernels.h"

namespace vlkv::intk {
namespace {

// One full unit of 16 codes -> 16 bytes in code order (int_pack.h's row layout).
template <int B>
inline uint8x16_t unpack16(const uint8_t* p) {
  if constexpr (B == 8) {
    return vld1q_u8(p);
  } else if constexpr (B == 4) {
    const uint8x8_t x = vld1_u8(p);
    return vcombine_u8(vand_u8(x, vdup_n_u8(15)), vshr_n_u8(x, 4));
  } else {
    uint32_t w;
    std::memcpy(&w, p, 4);
    // dword m = the 4 bytes shifted right by 2m: byte 4m + j = code j + 4m.
    const int32x4_t shifts = {0, -2, -4, -6};
    uint8x16_t c = vandq_u8(vreinterpretq_u8_u32(vshlq_u32(vdupq_n_u32(w), shifts)), vdupq_n_u8(3));
    if constexpr (B == 3) {
      uint16_t h;
      std::memcpy(&h, p + 4, 2);
      const uint8x16_t bits = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
      const uint8x16_t hb = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(h)), vdup_n_u8(static_cast<uint8_t>(h >> 8)));
      c = vorrq_u8(c, vandq_u8(vtstq_u8(hb, bits), vdupq_n_u8(4)));
    }
    return c;
  }
}

inline float32x4_t halves4(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

template <int B>
void dequantize_neon(const IntRowMeta& m, int d, float* out) {
  for (int u = 0; u < d; u += 16) {
    const uint8x16_t c = unpack16<B>(m.codes + u * B / 8);
    const uint16x8_t c0 = vmovl_u8(vget_low_u8(c)), c1 = vmovl_high_u8(c);
    const float32x4_t cf[4] = {vcvtq_f32_u32(vmovl_u16(vget_low_u16(c0))), vcvtq_f32_u32(vmovl_high_u16(c0)),
                               vcvtq_f32_u32(vmovl_u16(vget_low_u16(c1))), vcvtq_f32_u32(vmovl_high_u16(c1))};
    for (int i = 0; i < 4; ++i) {
      float32x4_t s, z;
      if (m.scale_c) {
        s = vld1q_f32(m.scale_c + u + 4 * i);
        z = vld1q_f32(m.min_c + u + 4 * i);
      } else {
        s = vdupq_laneq_f32(halves4(m.scale_h + 2 * (u / m.g)), 0);
        z = vdupq_laneq_f32(halves4(m.min_h + 2 * (u / m.g)), 0);
      }
      vst1q_f32(out + u + 4 * i, vfmaq_f32(z, cf[i], s));
    }
  }
}

void halves_to_floats_neon(const uint8_t* h, int d, float* out) {
  for (int i = 0; i < d; i += 4) vst1q_f32(out + i, halves4(h + 2 * i));
}

}  // namespace

const IntRowKernels kIntRowKernelsNeon{
    .dequantize = {dequantize_neon<2>, dequantize_neon<3>, dequantize_neon<4>, dequantize_neon<8>},
    .halves_to_floats = halves_to_floats_neon,
    .scores = {}};

}  // namespace vlkv::intk
