// 16 f32 lanes as four NEON vectors, for the ARM64 ports of the codecs' AVX-512 kernels: the
// same per-lane operations on four 4-lane registers, and horizontal sums in the x86 kernels'
// order (_mm512_reduce_add_ps / float_hsum_x86.h's hsum16: lanes i + 8, then i + 4, i + 2,
// i + 1), so a sum over 16 lanes gives the x86 tiers' bits. Included by *_arm.cpp /
// *_dotprod.cpp files only; unnamed namespace, so each file's copy keeps its own target.
#pragma once

#include <arm_neon.h>

#include <cstdint>

namespace vlkv::lanes16 {
namespace {

struct Lanes16 {
  float32x4_t v[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
};

inline Lanes16 load16(const float* p) {
  Lanes16 a;
  for (int i = 0; i < 4; ++i) a.v[i] = vld1q_f32(p + 4 * i);
  return a;
}

// Lanes 0..15 summed as hsum16 on x86: ((l_i + l_{i+8}) + (l_{i+4} + l_{i+12})) for i < 4,
// then (s0 + s2) + (s1 + s3).
inline float hsum16(const Lanes16& a) {
  const float32x4_t s = vaddq_f32(vaddq_f32(a.v[0], a.v[2]), vaddq_f32(a.v[1], a.v[3]));
  const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
  return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}
// 4 f16 values at p (any alignment) as floats (exact, as vcvtph2ps).
inline float32x4_t halves4(const uint8_t* p) { return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p))); }

// 16 int32 -> 16 s8, saturated (as vpmovsdb / vpackssdw + vpacksswb).
inline int8x16_t narrow_s8(const int32x4_t* v) {
  const int16x8_t a = vcombine_s16(vqmovn_s32(v[0]), vqmovn_s32(v[1]));
  const int16x8_t b = vcombine_s16(vqmovn_s32(v[2]), vqmovn_s32(v[3]));
  return vcombine_s8(vqmovn_s16(a), vqmovn_s16(b));
}

}  // namespace
}  // namespace vlkv::lanes16
