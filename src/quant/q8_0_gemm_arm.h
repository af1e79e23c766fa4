// The ARM64 kernel of q8_0_gemm.h over an 8-bit dot policy (dot_s8_arm.h: sdot by element at
// dotprod, smull + sadalp at neon). The panel's codes are x + 128 as u8; flipped back to s8
// (eor 0x80) they give the exact sum of w * x directly, so the bias term (the w . 128 that
// x86's vpdpbusd on x + 128 adds) is not needed. A pass takes R weight rows x 8 panel rows
// (two 4-lane halves): per block and 16 weight bytes (4 quads), 4 x 2 dots by element per row;
// then per scale group the x86 kernels' float steps acc = fma(f32(sum), dw * dx, acc) and the
// offset's fma, so the results are every x86 tier's (and the scalar reference's) bits.
// Included only inside a target region or in a baseline ARM64 file (q8_0_gemm_neon.cpp,
// q8_0_gemm_dotprod.cpp); unnamed namespace: each file's copy keeps its own target.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>

#include "quant/dot_s8_arm.h"
#include "quant/q8_0_gemm.h"
#include "quant/q8_0_lanes.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

// Block scales and 128 * (sum of codes), as block_terms_scalar (the bias only x86 reads).
void block_terms_arm(const uint8_t* blocks, int64_t row_bytes, int n_rows, int64_t n_blocks, int32_t* bias,
                     float* dw, int64_t ld) {
  for (int i = 0; i < n_rows; ++i)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* blk = blocks + i * row_bytes + b * q8lanes::kBytes;
      const int32_t s = vaddlvq_s8(vld1q_s8(reinterpret_cast<const int8_t*>(blk + 2))) +
                        vaddlvq_s8(vld1q_s8(reinterpret_cast<const int8_t*>(blk + 18)));
      bias[i * ld + b] = 128 * s;
      dw[i * ld + b] = load_half(blk);
    }
}

// s[i][v] += the dots of quad j of w16[i] with the codes of panel rows 4v..4v+3 (of the pass's
// 8) at dword xk.
template <class Dot, int j, int R>
inline void quad_step(typename Dot::Acc (&s)[R][2], const uint32_t* xk, const int8x16_t (&w16)[R]) {
  const uint8x16_t flip = vdupq_n_u8(0x80);
  const int8x16_t x0 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(reinterpret_cast<const uint8_t*>(xk)), flip));
  const int8x16_t x1 = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(reinterpret_cast<const uint8_t*>(xk + 4)), flip));
  for (int i = 0; i < R; ++i) {
    Dot::template add<j>(s[i][0], x0, w16[i]);
    Dot::template add<j>(s[i][1], x1, w16[i]);
  }
}

// Weight rows i0..i0+R-1 (codes from wbase) x panel rows 8h..8h+7.
template <class Dot, int R, bool kSplit, bool kOffset>
void tile_arm_r(const GemmWeightRows& w, const uint8_t* wbase, const GemmPanel& x, int64_t n_blocks, float* acc,
                int i0, int h) {
  constexpr int kGroups = kSplit ? 2 : 1;
  float32x4_t a[R][2];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 2; ++v) a[i][v] = vld1q_f32(acc + i * kGemmPanelRows + 8 * h + 4 * v);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint32_t* xb = x.codes + b * 8 * kGemmPanelRows + 8 * h;
    const float32x4_t dx[2] = {vld1q_f32(x.d + b * kGemmPanelRows + 8 * h),
                               vld1q_f32(x.d + b * kGemmPanelRows + 8 * h + 4)};
    for (int g = 0; g < kGroups; ++g) {
      typename Dot::Acc s[R][2];
      for (int q = g * 2 / kGroups; q < (g + 1) * 2 / kGroups; ++q) {  // 16 weight bytes: quads 4q..4q+3
        int8x16_t w16[R];
        for (int i = 0; i < R; ++i)
          w16[i] = vld1q_s8(reinterpret_cast<const int8_t*>(wbase + i * w.row_bytes + b * w.block_stride + 16 * q));
        const uint32_t* xq = xb + 4 * q * kGemmPanelRows;
        quad_step<Dot, 0>(s, xq, w16);
        quad_step<Dot, 1>(s, xq + kGemmPanelRows, w16);
        quad_step<Dot, 2>(s, xq + 2 * kGemmPanelRows, w16);
        quad_step<Dot, 3>(s, xq + 3 * kGemmPanelRows, w16);
      }
      for (int i = 0; i < R; ++i) {
        const float32x4_t dw = vdupq_n_f32(w.dw[(i0 + i) * w.ld + b * kGroups + g]);
        for (int v = 0; v < 2; ++v)
          a[i][v] = vfmaq_f32(a[i][v], vcvtq_f32_s32(Dot::total(s[i][v])), vmulq_f32(dw, dx[v]));
      }
    }
    if constexpr (kOffset) {
      const float32x4_t xs[2] = {vld1q_f32(x.xsum_d + b * kGemmPanelRows + 8 * h),
                                 vld1q_f32(x.xsum_d + b * kGemmPanelRows + 8 * h + 4)};
      for (int i = 0; i < R; ++i) {
        const float32x4_t o = vdupq_n_f32(w.offset[(i0 + i) * w.ld_offset + b]);
        for (int v = 0; v < 2; ++v) a[i][v] = vfmaq_f32(a[i][v], o, xs[v]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < 2; ++v) vst1q_f32(acc + i * kGemmPanelRows + 8 * h + 4 * v, a[i][v]);
}

template <class Dot, bool kSplit, bool kOffset>
void tile_arm_v(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  // 4 rows when a dot keeps one accumulator (sdot), 2 when it keeps two (smull + sadalp):
  // accumulators, weights and codes stay within the 32 vector registers.
  constexpr int kR = sizeof(typename Dot::Acc) == sizeof(int32x4_t) ? 4 : 2;
  for (int h = 0; h < 2; ++h)
    for (int i0 = 0; i0 < w.n_rows; i0 += kR) {
      const uint8_t* wb = w.w + w.code_offset + i0 * w.row_bytes;
      float* o = acc + i0 * kGemmPanelRows;
      switch (std::min(kR, w.n_rows - i0)) {
        case 4: tile_arm_r<Dot, (kR >= 4 ? 4 : 1), kSplit, kOffset>(w, wb, x, n_blocks, o, i0, h); break;
        case 3: tile_arm_r<Dot, (kR >= 3 ? 3 : 1), kSplit, kOffset>(w, wb, x, n_blocks, o, i0, h); break;
        case 2: tile_arm_r<Dot, 2, kSplit, kOffset>(w, wb, x, n_blocks, o, i0, h); break;
        default: tile_arm_r<Dot, 1, kSplit, kOffset>(w, wb, x, n_blocks, o, i0, h);
      }
    }
}

template <class Dot>
void tile_arm(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  if (w.split)
    return w.offset ? tile_arm_v<Dot, true, true>(w, x, n_blocks, acc) : tile_arm_v<Dot, true, false>(w, x, n_blocks, acc);
  return w.offset ? tile_arm_v<Dot, false, true>(w, x, n_blocks, acc) : tile_arm_v<Dot, false, false>(w, x, n_blocks, acc);
}

}  // namespace
}  // namespace vlkv::quant
