// ARM64 NEON fused ops of the integer codecs on tiled code layouts (int_tiles.h): the
// algorithm and the rounding of int_tile_kernels_avx512.h (same bounds, same per-lane float
// operations in the same order, the same horizontal sums), so where the x86 tiers agree bit
// for bit these kernels give the same bits. A 16-lane tile is read as four 4-lane groups
// (16 bytes of each 64-byte quad vector), one group per pass, so a pass keeps RB rows'
// accumulators in registers. The 8-bit dots by a policy type `Dot` (dot_s8_arm.h: sdot by
// element at dotprod, smull + sadalp at plain NEON).
// sdot and smull are signed x signed, where vpdpbusd is u8 x s8: 2- and 4-bit codes (< 16)
// are valid s8 as they are; 8-bit codes are offset to c - 128 (an eor with 0x80) and
// 128 * (sum of the input bytes) is added back to the int32 totals, so every total is the
// exact integer vpdpbusd sums (|sums| stay within the bounds int_tile_kernels_avx512.h states).
//
// Included only by int_kernels_arm.cpp (neon) and, inside its target region,
// int_kernels_dotprod.cpp: everything here is in an unnamed namespace so each copy keeps its target.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kv/codec.h"
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_tiles.h"
#include "quant/dot_s8_arm.h"
#include "kv/codecs/lanes16_arm.h"

namespace vlkv::intk {
namespace {

using intt::KeyTileShape;
using intt::ValueTileShape;
using namespace lanes16;
using dots8::dot4;

// Lanes 4g..4g+3 of one tile -> quads[j]: 4 bytes per lane (elements 4j..4j+3), as s8;
// 8-bit codes as c - 128 (kOffset8 adds 128 * input sums back).
template <int B>
inline void unpack_quads4(const uint8_t* tile, int g, int8x16_t* quads) {
  if constexpr (B == 2) {
    const uint8x16_t w = vld1q_u8(tile + 16 * g), k3 = vdupq_n_u8(3);
    quads[0] = vreinterpretq_s8_u8(vandq_u8(w, k3));
    quads[1] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(w, 2), k3));
    quads[2] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(w, 4), k3));
    quads[3] = vreinterpretq_s8_u8(vshrq_n_u8(w, 6));
  } else if constexpr (B == 4) {
    const uint8x16_t w0 = vld1q_u8(tile + 16 * g), w1 = vld1q_u8(tile + 64 + 16 * g), kf = vdupq_n_u8(15);
    quads[0] = vreinterpretq_s8_u8(vandq_u8(w0, kf));
    quads[1] = vreinterpretq_s8_u8(vshrq_n_u8(w0, 4));
    quads[2] = vreinterpretq_s8_u8(vandq_u8(w1, kf));
    quads[3] = vreinterpretq_s8_u8(vshrq_n_u8(w1, 4));
  } else {
    static_assert(B == 8, "2-, 4- and 8-bit tiles");
    const uint8x16_t k80 = vdupq_n_u8(0x80);
    for (int j = 0; j < 4; ++j) quads[j] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(tile + 64 * j + 16 * g), k80));
  }
}
constexpr int32_t kOffset8 = 128;

// Sum of the bytes v[i * P .. (i + 1) * P) for each piece i of each of n_q rows of d bytes.
inline void piece_byte_sums(const int8_t* v, int n_q, int d, int P, int32_t* out) {
  for (int r = 0; r < n_q; ++r)
    for (int pc = 0; pc < d / P; ++pc) {
      int32_t s = 0;
      for (int c = 0; c < P; c += 16) s += vaddlvq_s8(vld1q_s8(v + static_cast<int64_t>(r) * d + pc * P + c));
      out[r * (d / P) + pc] = s;
    }
}

constexpr float query_levels(bool wide) { return wide ? 16383.0f : 127.0f; }

// Rounds v = q (times mul when given) to qi = round(v * inv) as int_tile_kernels_avx512.h's round_q.
template <bool kWide>
inline void round_q(const float* q, const float* mul, const float* inv, int n, int8_t* hi, int8_t* lo) {
  const int32x4_t k127 = vdupq_n_s32(127);
  for (int c = 0; c < n; c += 16) {
    int32x4_t qh[4], ql[4];
    for (int i = 0; i < 4; ++i) {
      float32x4_t v = vmulq_f32(vld1q_f32(q + c + 4 * i), vld1q_f32(inv + c + 4 * i));
      if (mul) v = vmulq_f32(v, vld1q_f32(mul + c + 4 * i));
      const int32x4_t qi = vcvtnq_s32_f32(v);  // round to nearest even, as vcvtps2dq
      if constexpr (kWide) {
        ql[i] = vandq_s32(qi, k127);
        qh[i] = vshrq_n_s32(qi, 7);
      } else {
        ql[i] = qi;
      }
    }
    vst1q_s8(lo + c, narrow_s8(ql));
    if constexpr (kWide) vst1q_s8(hi + c, narrow_s8(qh));
  }
}

// ---------------- scores ----------------

struct QRows {  // RB prepared query rows
  const int8_t* hi;     // [RB, d]
  const int8_t* lo;
  const float* step;    // [RB, d / P]
  const int32_t* hsum;  // [RB, d / P] byte sums of hi / lo per piece (8-bit codes only)
  const int32_t* lsum;
};

// 16 tokens (one tile row of `codes`), RB query rows; arguments as int_tile_kernels_avx512.h's
// key_tile_rows. Four passes of 4 tokens.
template <int B, int RB, bool kPerToken, bool kWide, class Dot>
void key_tile_rows(const uint8_t* codes, int d, int P, QRows q, const uint8_t* sc_h, const uint8_t* mn_h,
                   const float* qsum, const float* c0, float scale, float* lg, int64_t ld) {
  constexpr int64_t kTb = 32 * B;
  const int np = d / P, upp = P / 16;
  for (int g = 0; g < 4; ++g) {
    float32x4_t accf[RB];
    for (int r = 0; r < RB; ++r) accf[r] = vdupq_n_f32(kPerToken ? 0.0f : c0[r]);
    for (int pc = 0; pc < np; ++pc) {
      typename Dot::Acc ah[RB], al[RB];
      for (int u = pc * upp; u < (pc + 1) * upp; ++u) {
        int8x16_t qd[4];
        unpack_quads4<B>(codes + u * kTb, g, qd);
        for (int r = 0; r < RB; ++r) {
          const int64_t at = static_cast<int64_t>(r) * d + 16 * u;
          if constexpr (kWide) dot4<Dot>(ah[r], qd, vld1q_s8(q.hi + at));
          dot4<Dot>(al[r], qd, vld1q_s8(q.lo + at));
        }
      }
      // Each int32 sum is exact in f32 (|sum| < 2^24); one rounding when combined.
      const float32x4_t sv = kPerToken ? halves4(sc_h + 2 * (16 * pc + 4 * g)) : vdupq_n_f32(1.0f);
      for (int r = 0; r < RB; ++r) {
        int32x4_t ih = Dot::total(ah[r]), il = Dot::total(al[r]);
        if constexpr (B == 8) {
          ih = vaddq_s32(ih, vdupq_n_s32(kOffset8 * q.hsum[r * np + pc]));
          il = vaddq_s32(il, vdupq_n_s32(kOffset8 * q.lsum[r * np + pc]));
        }
        const float32x4_t dot = kWide ? vfmaq_f32(vcvtq_f32_s32(il), vcvtq_f32_s32(ih), vdupq_n_f32(128.0f))
                                      : vcvtq_f32_s32(il);
        accf[r] = vfmaq_f32(accf[r], dot, vmulq_f32(sv, vdupq_n_f32(q.step[r * np + pc])));
        if constexpr (kPerToken)
          accf[r] = vfmaq_f32(accf[r], halves4(mn_h + 2 * (16 * pc + 4 * g)), vdupq_n_f32(qsum[r * np + pc]));
      }
    }
    for (int r = 0; r < RB; ++r) vst1q_f32(lg + r * ld + 4 * g, vmulq_f32(accf[r], vdupq_n_f32(scale)));
  }
}

struct ScoreScratch {
  std::vector<int8_t> hi, lo;
  std::vector<int32_t> hsum, lsum;
  std::vector<float> step, inv, qsum, c0, sc, mn, qmax, qhat, qstep;
};

// max over channels [c0, c0 + n) of |v (* mul)| (a max: any lane order gives the same value).
inline float piece_max(const float* v, const float* mul, int c0, int n) {
  float32x4_t mx = vdupq_n_f32(0.0f);
  for (int c = c0; c < c0 + n; c += 4) {
    float32x4_t x = vld1q_f32(v + c);
    if (mul) x = vmulq_f32(x, vld1q_f32(mul + c));
    mx = vmaxq_f32(mx, vabsq_f32(x));
  }
  return vmaxvq_f32(mx);
}
inline void set_piece_step(ScoreScratch& s, int r, int pc, int d, int P, float levels, float m) {
  s.step[static_cast<size_t>(r) * (d / P) + pc] = m / levels;
  const float iv = intt::inverse_step(levels, m);
  std::fill(s.inv.begin() + static_cast<int64_t>(r) * d + pc * P, s.inv.begin() + static_cast<int64_t>(r) * d + (pc + 1) * P, iv);
}

// As int_tile_kernels_avx512.h's wide_channel_rows (c0 summed in 16 lanes, hsum16's order).
inline void wide_channel_rows(const float* q, int n_q, int d, const float* qmax, const uint8_t* sc_h, const uint8_t* mn_h,
                              int8_t* hi, int8_t* lo, float* step, float* c0) {
  constexpr float kLevels = query_levels(true);
  float32x4_t mx = vdupq_n_f32(0.0f);
  for (int c = 0; c < d; c += 4) mx = vmaxq_f32(mx, vabsq_f32(vmulq_f32(vld1q_f32(qmax + c), halves4(sc_h + 2 * c))));
  const float m = vmaxvq_f32(mx);
  const float32x4_t iv = vdupq_n_f32(intt::inverse_step(kLevels, m));
  for (int r = 0; r < n_q; ++r) step[r] = m / kLevels;
  const int32x4_t k127 = vdupq_n_s32(127);
  for (int r = 0; r < n_q; ++r) {
    Lanes16 acc;
    for (int c = 0; c < d; c += 16) {
      const int64_t at = static_cast<int64_t>(r) * d + c;
      int32x4_t qh[4], ql[4];
      for (int i = 0; i < 4; ++i) {
        const float32x4_t qv = vld1q_f32(q + at + 4 * i);
        const int32x4_t qi = vcvtnq_s32_f32(vmulq_f32(qv, vmulq_f32(halves4(sc_h + 2 * (c + 4 * i)), iv)));
        ql[i] = vandq_s32(qi, k127);
        qh[i] = vshrq_n_s32(qi, 7);
        acc.v[i] = vfmaq_f32(acc.v[i], qv, halves4(mn_h + 2 * (c + 4 * i)));
      }
      vst1q_s8(lo + at, narrow_s8(ql));
      vst1q_s8(hi + at, narrow_s8(qh));
    }
    c0[r] = hsum16(acc);
  }
}

// As int_tile_kernels_avx512.h's narrow_channel_rows (one block's rounding at dot=8).
inline void narrow_channel_rows(const float* q, const float* qhat, const float* qstep, int n_q, int d,
                                const uint8_t* sc_h, const uint8_t* mn_h, float* sc, float* mn, int8_t* lo, float* step,
                                float* c0) {
  const int np = d / 32;
  for (int c = 0; c < d; c += 4) vst1q_f32(mn + c, halves4(mn_h + 2 * c));
  for (int pc = 0; pc < np; ++pc) {
    float32x4_t mx = vdupq_n_f32(0.0f);
    for (int i = 0; i < 32; i += 4) mx = vmaxq_f32(mx, vabsq_f32(halves4(sc_h + 64 * pc + 2 * i)));
    const float m = vmaxvq_f32(mx);
    const float32x4_t inv = vdupq_n_f32(intt::inverse_step(1.0f, m));
    for (int i = 0; i < 32; i += 4) vst1q_f32(sc + 32 * pc + i, vmulq_f32(halves4(sc_h + 64 * pc + 2 * i), inv));
    for (int r = 0; r < n_q; ++r) step[r * np + pc] = qstep[r * np + pc] * m;
  }
  for (int r = 0; r < n_q; ++r) {
    const int64_t o = static_cast<int64_t>(r) * d;
    Lanes16 acc;
    for (int c = 0; c < d; c += 16) {
      int32x4_t qi[4];
      for (int i = 0; i < 4; ++i) {
        acc.v[i] = vfmaq_f32(acc.v[i], vld1q_f32(q + o + c + 4 * i), vld1q_f32(mn + c + 4 * i));
        qi[i] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(qhat + o + c + 4 * i), vld1q_f32(sc + c + 4 * i)));
      }
      vst1q_s8(lo + o + c, narrow_s8(qi));
    }
    c0[r] = hsum16(acc);
  }
}

// ---------------- int_tile_loops.inc's hooks (Isa: the Dot policy) ----------------

template <int B, bool kWide, class Isa>
inline void size_rows(ScoreScratch& s, int n_q, int, int np) {
  s.hsum.assign(static_cast<size_t>(n_q) * np, 0);
  s.lsum.assign(s.hsum.size(), 0);
}
// The 8-bit codes' offset terms, after each rounding of the rows.
template <int B, bool kWide, class Isa>
inline void rounded_rows(ScoreScratch& s, int n_q, int d, int P) {
  if constexpr (B == 8) {
    if constexpr (kWide) piece_byte_sums(s.hi.data(), n_q, d, P, s.hsum.data());
    piece_byte_sums(s.lo.data(), n_q, d, P, s.lsum.data());
  }
}
template <int B, class Isa>
inline QRows query_rows(ScoreScratch& s, int r0, int d, int np) {
  const int64_t o = static_cast<int64_t>(r0) * np;
  return QRows{s.hi.data() + static_cast<int64_t>(r0) * d, s.lo.data() + static_cast<int64_t>(r0) * d,
               s.step.data() + o, s.hsum.data() + o, s.lsum.data() + o};
}
inline void abs_max_rows(const float* q, int n_q, int d, float* qmax) {
  for (int r = 0; r < n_q; ++r)
    for (int c = 0; c < d; c += 4)
      vst1q_f32(qmax + c, vmaxq_f32(vld1q_f32(qmax + c), vabsq_f32(vld1q_f32(q + static_cast<int64_t>(r) * d + c))));
}
inline void load_channel_meta(const uint8_t* blk, int d, float* sc, float* mn) {
  for (int i = 0; i < d; i += 4) {
    vst1q_f32(sc + i, halves4(blk + 2 * i));
    vst1q_f32(mn + i, halves4(blk + 2 * d + 2 * i));
  }
}
// sum_c q_c min_c in 16 lanes, hsum16's order (the AVX-512 path's bits).
inline float dot_min(const float* qr, const float* mn, int d) {
  Lanes16 acc;
  for (int i = 0; i < d; i += 16)
    for (int k = 0; k < 4; ++k) acc.v[k] = vfmaq_f32(acc.v[k], vld1q_f32(qr + i + 4 * k), vld1q_f32(mn + i + 4 * k));
  return hsum16(acc);
}

// ---------------- accumulate ----------------

using intt::kRunBlocks;  // 16-token blocks sharing one probability step (64 tokens)

struct AccScratch {
  // p' rounded (128 hi + lo, 7 bits each): [k][b][r][16] bytes, tokens of block b in order
  // (quad j of a row = tokens 4j..4j+3: the by-element operand of the dots).
  std::vector<int8_t> hi, lo;
  std::vector<int32_t> hsum, lsum;  // [RB][ng] byte sums of the run (8-bit codes' offset)
  std::vector<float> step;          // [RB][ng]
  std::vector<float> smax;          // [ng]
  std::vector<float> ph;            // [RB][64] p / max p of the run
  std::vector<float> mt;            // [RB][ng][16] lanes of sum_t p_t min_{t,g} + centre * residuals
};

// int_tile_kernels_avx512.h's accumulate_rows, rounding per 16-token block (as four 4-lane
// groups) and integer dots per 4 channels.
template <int B, int RB, bool kWide, class Dot>
void accumulate_rows(const float* p, int64_t ld, const SegmentView& seg, const ValueTileShape& sh, float* out,
                     AccScratch& s) {
  constexpr float kQMax = kWide ? 16383.0f : 127.0f;
  constexpr int64_t kTb = 32 * B;
  constexpr int kRun = 16 * kRunBlocks;
  const int d = sh.d, g = sh.g, ng = d / g, units = d / 16;
  s.hi.resize(static_cast<size_t>(ng) * kRunBlocks * 4 * 16);
  s.lo.resize(s.hi.size());
  s.step.resize(static_cast<size_t>(RB) * ng);
  s.hsum.resize(static_cast<size_t>(RB) * ng);
  s.lsum.resize(s.hsum.size());
  s.smax.resize(ng);
  s.ph.resize(static_cast<size_t>(RB) * kRun);
  s.mt.assign(static_cast<size_t>(RB) * ng * 16, 0.0f);
  int8_t* const hi = s.hi.data();
  int8_t* const lo = s.lo.data();
  float* const step = s.step.data();
  float* const mt = s.mt.data();
  float* const ph = s.ph.data();
  float* const smax = s.smax.data();
  auto at = [](int k, int b, int r) { return ((static_cast<int64_t>(k) * kRunBlocks + b) * 4 + r) * 16; };
  float pmax[RB];
  const int32x4_t k127 = vdupq_n_s32(127);
  const float32x4_t centre = vdupq_n_f32(0.5f * ((1 << B) - 1));
  const int64_t nb = seg.n_blocks();
  const uint8_t* blk[kRunBlocks];
  for (int64_t b0 = 0; b0 < nb; b0 += kRunBlocks) {
    const int kb = static_cast<int>(std::min<int64_t>(kRunBlocks, nb - b0));
    for (int b = 0; b < kb; ++b) blk[b] = seg.block(b0 + b);
    // The next run's blocks, a few lines per unit below (a burst would fill the line buffers).
    const uint8_t* next[kRunBlocks];
    const int kn = static_cast<int>(std::clamp<int64_t>(nb - b0 - kRunBlocks, 0, kRunBlocks));
    for (int b = 0; b < kn; ++b) next[b] = seg.block(b0 + kRunBlocks + b);
    const int64_t lines = (seg.block_bytes + 63) / 64;
    for (int r = 0; r < RB; ++r) {
      float32x4_t mx = vdupq_n_f32(0.0f);
      for (int t = 0; t < 16 * kb; t += 4) mx = vmaxq_f32(mx, vld1q_f32(p + r * ld + b0 * 16 + t));
      pmax[r] = vmaxvq_f32(mx);
    }
    for (int k = 0; k < ng; ++k) {
      float32x4_t mx = vdupq_n_f32(0.0f);
      for (int b = 0; b < kb; ++b)
        for (int i = 0; i < 16; i += 4) mx = vmaxq_f32(mx, halves4(blk[b] + 2 * (16 * k + i)));
      smax[k] = vmaxvq_f32(mx);
    }
    for (int r = 0; r < RB; ++r)
      for (int k = 0; k < ng; ++k) step[r * ng + k] = pmax[r] * smax[k] / kQMax;
    for (int r = 0; r < RB; ++r) {
      const float32x4_t pinv = vdupq_n_f32(intt::inverse_step(1.0f, pmax[r]));
      for (int t = 0; t < 16 * kb; t += 4)
        vst1q_f32(ph + r * kRun + t, vmulq_f32(vld1q_f32(p + r * ld + b0 * 16 + t), pinv));
    }
    for (int k = 0; k < ng; ++k) {
      Lanes16 mta[RB], vsum[RB];
      int32x4_t qsum[RB][4];
      for (int r = 0; r < RB; ++r)
        for (int i = 0; i < 4; ++i) qsum[r][i] = vdupq_n_s32(0);
      const float32x4_t sinv = vdupq_n_f32(intt::inverse_step(kQMax, smax[k]));
      for (int b = 0; b < kb; ++b) {
        for (int r = 0; r < RB; ++r) {
          int32x4_t qh[4], ql[4];
          for (int i = 0; i < 4; ++i) {
            const float32x4_t sv = vmulq_f32(halves4(blk[b] + 2 * (16 * k + 4 * i)), sinv);
            const float32x4_t mv = halves4(blk[b] + 2 * (16 * (ng + k) + 4 * i));
            const float32x4_t pv = vld1q_f32(ph + r * kRun + 16 * b + 4 * i);
            const float32x4_t v = vmulq_f32(pv, sv);  // p' / step
            const int32x4_t qi = vcvtnq_s32_f32(v);
            if constexpr (kWide) {
              qh[i] = vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(qi), 7));  // as vpsrld
              ql[i] = vandq_s32(qi, k127);
            } else {
              ql[i] = qi;
              vsum[r].v[i] = vaddq_f32(vsum[r].v[i], v);
              qsum[r][i] = vaddq_s32(qsum[r][i], qi);
            }
            mta[r].v[i] = vfmaq_f32(mta[r].v[i], pv, mv);
          }
          if constexpr (kWide) vst1q_s8(hi + at(k, b, r), narrow_s8(qh));
          vst1q_s8(lo + at(k, b, r), narrow_s8(ql));
        }
      }
      for (int r = 0; r < RB; ++r) {
        if constexpr (B == 8) {  // the offset terms: sums of the stored bytes over the run
          int32_t sh8 = 0, sl8 = 0;
          for (int b = 0; b < kb; ++b) {
            if constexpr (kWide) sh8 += vaddlvq_s8(vld1q_s8(hi + at(k, b, r)));
            sl8 += vaddlvq_s8(vld1q_s8(lo + at(k, b, r)));
          }
          s.hsum[r * ng + k] = sh8;
          s.lsum[r * ng + k] = sl8;
        }
        float* m = mt + (r * ng + k) * 16;
        for (int i = 0; i < 4; ++i) {
          float32x4_t sum = vfmaq_f32(vld1q_f32(m + 4 * i), mta[r].v[i], vdupq_n_f32(pmax[r]));
          // the residuals times the code centre: sum_t (p'_t - step * pq_t) * (2^B - 1) / 2
          if constexpr (!kWide) {
            const float32x4_t res = vsubq_f32(vsum[r].v[i], vcvtq_f32_s32(qsum[r][i]));
            sum = vfmaq_f32(sum, res, vmulq_f32(centre, vdupq_n_f32(step[r * ng + k])));
          }
          vst1q_f32(m + 4 * i, sum);
        }
      }
    }
    // Integer dots: per 16-channel unit and 4-channel group, the run's blocks, every row.
    for (int u = 0; u < units; ++u) {
      const int k = u * 16 / g;
      for (int b = 0; b < kn; ++b) prefetch_lines(next[b], u * lines / units, (u + 1) * lines / units);
      for (int gq = 0; gq < 4; ++gq) {
        typename Dot::Acc ah[RB], al[RB];
        for (int b = 0; b < kb; ++b) {
          int8x16_t qd[4];
          unpack_quads4<B>(blk[b] + sh.meta_bytes + u * kTb, gq, qd);
          for (int r = 0; r < RB; ++r) {
            if constexpr (kWide) dot4<Dot>(ah[r], qd, vld1q_s8(hi + at(k, b, r)));
            dot4<Dot>(al[r], qd, vld1q_s8(lo + at(k, b, r)));
          }
        }
        for (int r = 0; r < RB; ++r) {
          int32x4_t ih = Dot::total(ah[r]), il = Dot::total(al[r]);
          if constexpr (B == 8) {
            ih = vaddq_s32(ih, vdupq_n_s32(kOffset8 * s.hsum[r * ng + k]));
            il = vaddq_s32(il, vdupq_n_s32(kOffset8 * s.lsum[r * ng + k]));
          }
          float* o = out + static_cast<int64_t>(r) * d + 16 * u + 4 * gq;
          const float32x4_t dot = kWide ? vfmaq_f32(vcvtq_f32_s32(il), vcvtq_f32_s32(ih), vdupq_n_f32(128.0f))
                                        : vcvtq_f32_s32(il);
          vst1q_f32(o, vfmaq_f32(vld1q_f32(o), dot, vdupq_n_f32(step[r * ng + k])));
        }
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int k = 0; k < ng; ++k) {
      const float m = hsum16(load16(mt + (r * ng + k) * 16));
      float* o = out + static_cast<int64_t>(r) * d + k * g;
      for (int i = 0; i < g; ++i) o[i] += m;
    }
}

#include "kv/codecs/int_tile_loops.inc"

}  // namespace
}  // namespace vlkv::intk
