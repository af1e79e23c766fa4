// The ARM64 NEON dequantize and dot loops for the block formats, on the same decoder
// contract as simd_blocks_x86.h: a format turns one block into groups of 32 signed codes
// with f32 scale/offset per 16 (Group32Arm). The 8-bit dots take the x86 kernels' float
// steps lane for lane (two 4-lane halves for one 8-lane AVX2 vector, the same horizontal
// sum), so where the integer sums are exact their results are the x86 tiers' bits.
// Included by the <type>_arm.cpp files only.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "quant/quant_internal.h"

namespace vlkv::quant {

// 32 consecutive weights w[i] = q[i] * s + b, (s0, b0) for i < 16 (q[0]) and (s1, b1) for
// i >= 16 (q[1]); formats without an offset set kBias = false and leave b at 0.
struct Group32Arm {
  int8x16_t q[2];
  float s0, s1;
  float b0, b1;
};

// A format's traits provide kBlockElems, kBlockBytes, kGroups, kBias (as simd_blocks_x86.h)
// and static void decode(const uint8_t* block, Group32Arm* groups).

// Weights 16h .. 16h + 15 of a group as 4 x 4 floats.
template <bool kBias>
inline void half_weights(const Group32Arm& g, int h, float32x4_t w[4]) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(g.q[h])), hi = vmovl_high_s8(g.q[h]);
  const float32x4_t q[4] = {vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_high_s16(lo)),
                            vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_high_s16(hi))};
  const float32x4_t s = vdupq_n_f32(h ? g.s1 : g.s0);
  for (int i = 0; i < 4; ++i) {
    // q*s is exact for every format here, so the fused form rounds once, like ggml's q*s + b.
    if constexpr (kBias) w[i] = vfmaq_f32(vdupq_n_f32(h ? g.b1 : g.b0), q[i], s);
    else w[i] = vmulq_f32(q[i], s);
  }
}

// Calls weights16(w) with each 16 consecutive weights (as 4 x 4 floats) of the n / kBlockElems
// blocks at src, in order.
template <class T, class F>
inline void for_each_weights16(const void* src, int64_t n, F&& weights16) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / T::kBlockElems; ++b, p += T::kBlockBytes) {
    Group32Arm g[T::kGroups];
    T::decode(p, g);
    for (int k = 0; k < T::kGroups; ++k)
      for (int h = 0; h < 2; ++h) {
        float32x4_t w[4];
        half_weights<T::kBias>(g[k], h, w);
        weights16(w);
      }
  }
}

template <class T>
void dequantize_neon(const void* src, float* dst, int64_t n) {
  for_each_weights16<T>(src, n, [&](const float32x4_t* w) {
    for (int i = 0; i < 4; ++i) vst1q_f32(dst + 4 * i, w[i]);
    dst += 16;
  });
}

template <class T>
float dot_neon(const void* row, const float* x, int64_t n) {
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  for_each_weights16<T>(row, n, [&](const float32x4_t* w) {
    for (int i = 0; i < 4; ++i) acc[i] = vfmaq_f32(acc[i], w[i], vld1q_f32(x + 4 * i));
    x += 16;
  });
  return vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
}

// Products of 16 weight codes with 16 activation codes, summed per 4 bytes: 4 exact int32.
// Plain NEON: 8 x 8 -> 16-bit products (|w x| <= 2^14), pairwise widening adds.
inline int32x4_t quad_sums_neon(int8x16_t w, int8x16_t x) {
  const int32x4_t a = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)));
  const int32x4_t c = vpaddlq_s16(vmull_high_s8(w, x));
  return vpaddq_s32(a, c);
}
// ARMv8.2 dotprod: one sdot.
VLKV_TARGET(VLKV_ISA_DOTPROD) inline int32x4_t quad_sums_dotprod(int8x16_t w, int8x16_t x) {
  return vdotq_s32(vdupq_n_s32(0), w, x);
}

// AVX2's hsum of the 8 lanes (lo | hi): ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
inline float hsum8_as_avx2(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2)) + (vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3));
}

// dot_q8 in q8_dot_x86.h's steps: per group of 32, products summed per 4 bytes (8 lanes),
// converted and FMA'd with (s * d) into acc0 (even groups) or acc1 (odd groups).
#define VLKV_DEFINE_DOT_Q8_ARM(NAME, TARGET, QUADS)                                                           \
  template <class T>                                                                                         \
  TARGET float NAME(const void* row, const Q8Activations& x, int64_t n) {                                    \
    const auto* p = static_cast<const uint8_t*>(row);                                                        \
    const int8_t* xq = x.q.data();                                                                           \
    const float* xd = x.d.data();                                                                            \
    const int32_t* hs = x.half_sum.data();                                                                   \
    float32x4_t acc[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}}; \
    float bias = 0.0f;                                                                                       \
    for (int64_t b = 0; b < n / T::kBlockElems; ++b, p += T::kBlockBytes) {                                  \
      Group32Arm g[T::kGroups];                                                                              \
      T::decode(p, g);                                                                                       \
      for (int k = 0; k < T::kGroups; ++k) {                                                                 \
        const float d = *xd;                                                                                 \
        const int32x4_t lo = QUADS(g[k].q[0], vld1q_s8(xq)), hi = QUADS(g[k].q[1], vld1q_s8(xq + 16));       \
        float32x4_t* a = acc[k & 1];                                                                         \
        a[0] = vfmaq_f32(a[0], vcvtq_f32_s32(lo), vdupq_n_f32(g[k].s0 * d));                                 \
        a[1] = vfmaq_f32(a[1], vcvtq_f32_s32(hi), vdupq_n_f32(g[k].s1 * d));                                 \
        if constexpr (T::kBias)                                                                              \
          bias += (g[k].b0 * static_cast<float>(hs[0]) + g[k].b1 * static_cast<float>(hs[1])) * d;           \
        xq += 32;                                                                                            \
        xd += 1;                                                                                             \
        hs += 2;                                                                                             \
      }                                                                                                      \
    }                                                                                                        \
    return hsum8_as_avx2(vaddq_f32(acc[0][0], acc[1][0]), vaddq_f32(acc[0][1], acc[1][1])) + bias;           \
  }

VLKV_DEFINE_DOT_Q8_ARM(dot_q8_neon, , quad_sums_neon)
VLKV_DEFINE_DOT_Q8_ARM(dot_q8_dotprod, VLKV_TARGET(VLKV_ISA_DOTPROD), quad_sums_dotprod)
#undef VLKV_DEFINE_DOT_Q8_ARM

// Byte i = 0x10 where bit i of bits is set (the fifth bit of Q5_0 / Q5_1 codes), bytes 16h .. 16h + 15.
inline uint8x16_t bits_to_0x10(uint32_t bits, int h) {
  const uint8x16_t bytes = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits >> (16 * h))),
                                       vdup_n_u8(static_cast<uint8_t>(bits >> (16 * h + 8))));
  const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  return vandq_u8(vtstq_u8(bytes, vld1q_u8(kBit)), vdupq_n_u8(0x10));
}

// The ARM variants of a block format with traits T.
template <class T>
constexpr FormatKernels neon_variant() {
  return {dequantize_neon<T>, dot_neon<T>, dot_q8_neon<T>};
}
template <class T>
constexpr FormatKernels dotprod_variant() {
  return {dequantize_neon<T>, dot_neon<T>, dot_q8_dotprod<T>};
}

}  // namespace vlkv::quant
