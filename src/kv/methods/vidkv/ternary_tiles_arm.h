// The ARM64 ternary tile kernels (layout: ternary_tiles.h), included by ternary_tiles_arm.cpp
// (plain NEON) and, inside its target region, ternary_tiles_dotprod.cpp; unnamed namespace,
// so each file's copy keeps its target (base/simd_dispatch.h).
// Accumulate: ternary_tiles_x86.h's rounding (15-bit p = 128 hi + lo per block, hi <= 255,
// lo <= 127) and its float steps, with the integer dots of dot_s8_arm.h: hi is offset to
// hi - 128 (s8) and 128 * sum_t code(t, c) (one more dot, with ones) added back, so every
// channel's int32 sums are the x86 kernels' exact ones and the outputs their bits.
#pragma once

#include <arm_neon.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/dot_s8_arm.h"
#include "kv/methods/vidkv/ternary_tiles.h"

namespace vlkv::ternt {
namespace {

// round_p15 of ternary_tiles_x86.h: hb, lb [G] (p * 32767 / max p, high 8 and low 7 bits);
// false when some p < 0, NaN or inf (the codec's float path handles those).
inline bool round_p15_neon(const float* p, int G, uint8_t* hb, uint8_t* lb, float* pmax_out) {
  float pmax = 0.0f, pmin = 0.0f;
  for (int t = 0; t < G; ++t) {
    if (std::isnan(p[t])) return false;
    pmax = std::max(pmax, p[t]);
    pmin = std::min(pmin, p[t]);
  }
  if (pmin < 0.0f) return false;
  if (!(pmax <= 3.4e38f)) return false;  // inf: the float path propagates it
  *pmax_out = pmax;
  if (pmax < intt::kMinRoundedMax) return true;  // every p ~0 (intt::inverse_step)
  const float32x4_t inv = vdupq_n_f32(32767.0f / pmax);
  for (int t = 0; t < G; t += 4) {  // G % 4 == 0
    const int32x4_t pi = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(p + t), inv));  // [0, 32767]
    const uint16x4_t h = vmovn_u32(vshrq_n_u32(vreinterpretq_u32_s32(pi), 7));
    const uint16x4_t l = vmovn_u32(vandq_u32(vreinterpretq_u32_s32(pi), vdupq_n_u32(127)));
    const uint8x8_t h8 = vmovn_u16(vcombine_u16(h, h)), l8 = vmovn_u16(vcombine_u16(l, l));
    vst1_lane_u32(reinterpret_cast<uint32_t*>(hb + t), vreinterpret_u32_u8(h8), 0);
    vst1_lane_u32(reinterpret_cast<uint32_t*>(lb + t), vreinterpret_u32_u8(l8), 0);
  }
  return true;
}

// acc += the dot of codes (4 lanes x 4 tokens) with quad `lane` of q16 (a run-time lane).
template <class Dot>
inline void dot_lane(typename Dot::Acc& a, int8x16_t codes, int8x16_t q16, int lane) {
  switch (lane) {
    case 0: Dot::template add<0>(a, codes, q16); break;
    case 1: Dot::template add<1>(a, codes, q16); break;
    case 2: Dot::template add<2>(a, codes, q16); break;
    default: Dot::template add<3>(a, codes, q16);
  }
}

template <class Dot>
bool accum_tiles_arm(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out) {
  alignas(16) uint8_t hb[256 + 16] = {}, lb[256 + 16] = {};  // [G], read 16 at a time
  float pmax = 0.0f;
  if (!round_p15_neon(p, o.G, hb, lb, &pmax)) return false;
  if (pmax == 0.0f) return true;  // every p is 0
  const float32x4_t step = vdupq_n_f32(pmax / 32767.0f);
  const int nu = o.d / 16, nj = o.G / 4;
  const int8x16_t k80 = vdupq_n_s8(-128), ones = vdupq_n_s8(1);
  for (int u = 0; u < nu; ++u)
    for (int g = 0; g < 4; ++g) {  // channels 16u + 4g .. + 3
      typename Dot::Acc ah, al, an;
      for (int j = 0; j < nj; ++j) {
        const int8x16_t c = vld1q_s8(codes + 64 * (static_cast<int64_t>(u) * nj + j) + 16 * g);
        const int q0 = 4 * (j & ~3);
        const int8x16_t h16 = vaddq_s8(vreinterpretq_s8_u8(vld1q_u8(hb + q0)), k80);  // hi - 128 (mod 256)
        dot_lane<Dot>(ah, c, h16, j & 3);
        dot_lane<Dot>(al, c, vreinterpretq_s8_u8(vld1q_u8(lb + q0)), j & 3);
        Dot::template add<0>(an, c, ones);  // sum of the codes
      }
      const int32x4_t ih = vaddq_s32(Dot::total(ah), vshlq_n_s32(Dot::total(an), 7));
      const float32x4_t dot = vfmaq_f32(vcvtq_f32_s32(Dot::total(al)), vcvtq_f32_s32(ih), vdupq_n_f32(128.0f));
      const int c0 = 16 * u + 4 * g;
      const float32x4_t w = vmulq_f32(vld1q_f32(sig + c0), step);
      vst1q_f32(out + c0, vfmaq_f32(vld1q_f32(out + c0), dot, w));
    }
  return true;
}

}  // namespace
}  // namespace vlkv::ternt
