// AVX-512 VNNI fused ops of the integer codecs on tiled code layouts (int_tiles.h):
// integer dot products on the codes in place, vpdpbusd on 4 x 16 codes at a time.
// Float inputs are rounded to 14 bits + sign (kWide: two s8 parts, two vpdpbusd - the codecs'
// default, dot=16) or to 7 bits + sign (dot=8: half the integer work, as llama.cpp's q8
// queries; bounds below with 16383 -> 127).
//
// scores (key tiles; lane = token): the query row (times the per-channel scales for
// per-channel blocks) is rounded to 15 bits (sign + 14), split into two s8 parts (two
// vpdpbusd), with one f32 step per group (per-token codecs) or per block (per-channel; at
// 8 bits per row and 32 channels, as q * scale spans orders of magnitude across outlier
// channels, from the bound max |q| * max scale over the piece: narrow_query_rows).
//   |error| <= d * m * (2^B - 1) / (2 * 16383), m = max|q'|, q' = q (* per-channel scale);
//   per channel at dot=8 m = max |q| * max scale, / 127.
// accumulate (value tiles; lane = channel): p' = p_t * scale_{t,g} is rounded to 14 bits
// (two 7-bit halves, two vpdpbusd; dot=8: 7 bits, one) with one step per (row, group, 64
// tokens) - max p times max scale over the run, a bound on max p' - and the mins add
// sum_t p_t min_{t,g} in f32.
// At 7 bits the rounding error multiplies centred codes: sum_t (p'_t - step * pq_t) * (2^B - 1)/2
// is added back exactly per (row, group), which halves the worst case and the RMS error.
//   |error| per output <= sum over the 64-token runs of 64 * step / 2 * (2^B - 1),
//   step = max p * max scale / 16383 (dot=8: / 127) over the run. B = 2, 4 and 8.
// Exact int32 sums, each exact in f32 (< 2^24), worst case at B = 8 (codes up to 255, s8 query
// parts in [-128, 127], probability parts in [0, 127]): scores sum one step's P channels,
// P * 255 * 128 < 2^24 for P <= 512 (per token P = g, per channel P = d at dot=16, 16 or 32
// at dot=8); IntCodec runs 8-bit key tiles only with P <= intt::kMaxDotChannels8 = 512
// (dequantizing beyond). accumulate sums a 64-token run: 64 * 255 * 127 < 2^21, any B.
// p must be non-negative (softmax weights), as attention passes them.
//
// Included only inside int_kernels_avx512vnni.cpp's target region; the drivers are int_tile_loops.inc's.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/simd_dispatch.h"
#include "kv/codec.h"
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_tiles.h"

// GCC 12's AVX-512 headers seed many intrinsics with _mm512_undefined_*(), which trips
// -Wmaybe-uninitialized (and, for _mm512_reduce_*_ps, -Wuninitialized) once inlined here;
// the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace vlkv::tilek {

using intt::KeyTileShape;
using intt::ValueTileShape;

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One tile -> quads[j]: lane l = 4 codes (elements 4j..4j+3 of lane l) as bytes.
template <int B>
inline void unpack_quads(const uint8_t* tile, __m512i* quads) {
  if constexpr (B == 2) {
    const __m512i w = _mm512_loadu_si512(tile), k3 = _mm512_set1_epi8(3);
    quads[0] = _mm512_and_si512(w, k3);
    quads[1] = _mm512_and_si512(_mm512_srli_epi16(w, 2), k3);
    quads[2] = _mm512_and_si512(_mm512_srli_epi16(w, 4), k3);
    quads[3] = _mm512_and_si512(_mm512_srli_epi16(w, 6), k3);
  } else if constexpr (B == 4) {
    const __m512i w0 = _mm512_loadu_si512(tile), w1 = _mm512_loadu_si512(tile + 64), kf = _mm512_set1_epi8(15);
    quads[0] = _mm512_and_si512(w0, kf);
    quads[1] = _mm512_and_si512(_mm512_srli_epi16(w0, 4), kf);
    quads[2] = _mm512_and_si512(w1, kf);
    quads[3] = _mm512_and_si512(_mm512_srli_epi16(w1, 4), kf);
  } else {
    static_assert(B == 8, "2-, 4- and 8-bit tiles");
    for (int j = 0; j < 4; ++j) quads[j] = _mm512_loadu_si512(tile + 64 * j);  // one vector per quad
  }
}

inline __m512 load_halves16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Rounds v = q (times mul when given) to qi = round(v * inv): kWide splits qi = 128 hi + lo
// (lo in [0, 127], hi = qi >> 7 in s8, |qi| <= 16383), narrow stores qi (|qi| <= 127).
//   q, mul, inv: [n] with n % 16 == 0 (inv per channel); hi, lo: [n]
template <bool kWide>
inline void round_q(const float* q, const float* mul, const float* inv, int n, int8_t* hi, int8_t* lo) {
  const __m512i k127 = _mm512_set1_epi32(127);
  for (int c = 0; c < n; c += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(q + c), _mm512_loadu_ps(inv + c));
    if (mul) v = _mm512_mul_ps(v, _mm512_loadu_ps(mul + c));
    const __m512i qi = _mm512_cvtps_epi32(v);  // round to nearest
    if constexpr (kWide) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + c), _mm512_cvtepi32_epi8(_mm512_and_si512(qi, k127)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + c), _mm512_cvtsepi32_epi8(_mm512_srai_epi32(qi, 7)));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + c), _mm512_cvtsepi32_epi8(qi));
    }
  }
}

constexpr float query_levels(bool wide) { return wide ? 16383.0f : 127.0f; }

// ---------------- scores ----------------

struct QRows {  // RB prepared query rows
  const int8_t* hi;  // [RB, d]
  const int8_t* lo;
  const float* step;  // [RB, d / P]
};

// 16 tokens (one tile row of `codes`), RB query rows. Per-token (kPerToken): scales / mins
// [n_groups][16] f16 at sc_h / mn_h, qsum [RB][n_groups] = sum of q over each group, and
// P == g; per-channel: c0 [RB] = sum_c q_c min_c.
template <int B, int RB, bool kPerToken, bool kWide, class Isa>
void key_tile_rows(const uint8_t* codes, int d, int P, QRows q, const uint8_t* sc_h, const uint8_t* mn_h,
                                  const float* qsum, const float* c0, float scale, float* lg, int64_t ld) {
  constexpr int64_t kTb = 32 * B;
  const int np = d / P, upp = P / 16;
  __m512 accf[RB];
  for (int r = 0; r < RB; ++r) accf[r] = kPerToken ? _mm512_setzero_ps() : _mm512_set1_ps(c0[r]);
  for (int pc = 0; pc < np; ++pc) {
    __m512i ah[RB], al[RB];
    for (int r = 0; r < RB; ++r) ah[r] = al[r] = _mm512_setzero_si512();
    for (int u = pc * upp; u < (pc + 1) * upp; ++u) {
      __m512i qd[4];
      unpack_quads<B>(codes + u * kTb, qd);
      for (int r = 0; r < RB; ++r) {
        const int8_t* h = q.hi + static_cast<int64_t>(r) * d + 16 * u;
        const int8_t* l = q.lo + static_cast<int64_t>(r) * d + 16 * u;
        for (int j = 0; j < 4; ++j) {
          if constexpr (kWide) ah[r] = _mm512_dpbusd_epi32(ah[r], qd[j], _mm512_set1_epi32(load_i32(h + 4 * j)));
          al[r] = _mm512_dpbusd_epi32(al[r], qd[j], _mm512_set1_epi32(load_i32(l + 4 * j)));
        }
      }
    }
    // Each int32 sum is exact in f32 (|sum| < 2^24); one rounding when combined.
    const __m512 sv = kPerToken ? load_halves16(sc_h + 2 * 16 * pc) : _mm512_set1_ps(1.0f);
    for (int r = 0; r < RB; ++r) {
      const __m512 dot = kWide ? _mm512_fmadd_ps(_mm512_cvtepi32_ps(ah[r]), _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(al[r]))
                               : _mm512_cvtepi32_ps(al[r]);
      accf[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(sv, _mm512_set1_ps(q.step[r * np + pc])), accf[r]);
      if constexpr (kPerToken)
        accf[r] = _mm512_fmadd_ps(load_halves16(mn_h + 2 * 16 * pc), _mm512_set1_ps(qsum[r * np + pc]), accf[r]);
    }
  }
  for (int r = 0; r < RB; ++r) _mm512_storeu_ps(lg + r * ld, _mm512_mul_ps(accf[r], _mm512_set1_ps(scale)));
}

struct ScoreScratch {
  std::vector<int8_t> hi, lo;
  std::vector<float> step, inv, qsum, c0, sc, mn, qmax, qhat, qstep;
};

// max over channels [c0, c0 + n) of |v (* mul)|.
inline float piece_max(const float* v, const float* mul, int c0, int n) {
  __m512 mx = _mm512_setzero_ps();
  for (int c = c0; c < c0 + n; c += 16) {
    __m512 x = _mm512_loadu_ps(v + c);
    if (mul) x = _mm512_mul_ps(x, _mm512_loadu_ps(mul + c));
    mx = _mm512_max_ps(mx, _mm512_abs_ps(x));
  }
  return _mm512_reduce_max_ps(mx);
}
// Step of piece pc of row r from its max m: inv[r, c] = levels / m over the piece (0 when m is 0).
inline void set_piece_step(ScoreScratch& s, int r, int pc, int d, int P, float levels, float m) {
  s.step[static_cast<size_t>(r) * (d / P) + pc] = m / levels;
  const __m512 iv = _mm512_set1_ps(intt::inverse_step(levels, m));
  for (int c = pc * P; c < (pc + 1) * P; c += 16) _mm512_storeu_ps(&s.inv[static_cast<size_t>(r) * d + c], iv);
}

// Per-channel block at dot=16: one step for every row, m = max_c max_r |q_rc| * scale_c
// (qmax [d] holds max_r |q_rc|); each row rounded to qi = round(q * scale_c * 16383 / m)
// (hi / lo [n_q, d]) and c0[r] = sum_c q_rc min_c. One pass over the channels for every row,
// the f16 scales and mins read in place (sc_h, mn_h: [d] f16), four rows' sums interleaved;
// per row the same operations in the same order as round_q and a sequential fma chain.
inline void wide_channel_rows(const float* q, int n_q, int d, const float* qmax, const uint8_t* sc_h,
                                             const uint8_t* mn_h, int8_t* hi, int8_t* lo, float* step, float* c0) {
  constexpr float kLevels = query_levels(true);
  __m512 mx = _mm512_setzero_ps();
  for (int c = 0; c < d; c += 16)
    mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_mul_ps(_mm512_loadu_ps(qmax + c), load_halves16(sc_h + 2 * c))));
  const float m = _mm512_reduce_max_ps(mx);
  const __m512 iv = _mm512_set1_ps(intt::inverse_step(kLevels, m));
  for (int r = 0; r < n_q; ++r) step[r] = m / kLevels;
  const __m512i k127 = _mm512_set1_epi32(127);
  for (int r0 = 0; r0 < n_q; r0 += 4) {
    const int rb = std::min(4, n_q - r0);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int c = 0; c < d; c += 16) {
      const __m512 inv = _mm512_mul_ps(load_halves16(sc_h + 2 * c), iv);
      const __m512 mn = load_halves16(mn_h + 2 * c);
      for (int k = 0; k < rb; ++k) {
        const int64_t at = static_cast<int64_t>(r0 + k) * d + c;
        const __m512 qv = _mm512_loadu_ps(q + at);
        const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(qv, inv));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + at), _mm512_cvtepi32_epi8(_mm512_and_si512(qi, k127)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + at), _mm512_cvtsepi32_epi8(_mm512_srai_epi32(qi, 7)));
        acc[k] = _mm512_fmadd_ps(qv, mn, acc[k]);
      }
    }
    for (int k = 0; k < rb; ++k) c0[r0 + k] = _mm512_reduce_add_ps(acc[k]);
  }
}

// Per-channel blocks at dot=8, 32-channel pieces: qi = round(q^_c * s^_c) in s8 with
//   q^ = q * 127 / max |q| over the piece (per row, once per call: narrow_query_rows) and
//   s^ = scale / max scale over the piece (per block, shared by every row),
// so step = max |q| * max scale / 127 per (row, piece) bounds max |q_c scale_c| / 127. The
// bound is looser than that max (by the spread of q * scale inside a piece, ~2x on outlier
// data), but the rounding is one multiply per query element and block, where the exact max
// needed a reduction and two divisions per (row, block): it cost as much as the dots.
// (narrow_query_rows is int_tile_loops.inc's, the same on every tier.)

// One block's rounding (see narrow_query_rows): lo [n_q, d] = round(q^ * s^), step [n_q, np]
// = qstep * max scale, c0[r] = sum_c q_rc min_c (the AVX2 path's lane order: same bits).
//   sc_h, mn_h: [d] f16; sc, mn: [d] scratch for s^ and the mins as floats
inline void narrow_channel_rows(const float* q, const float* qhat, const float* qstep, int n_q, int d,
                                               const uint8_t* sc_h, const uint8_t* mn_h, float* sc, float* mn,
                                               int8_t* lo, float* step, float* c0) {
  const int np = d / 32;
  for (int c = 0; c < d; c += 16) _mm512_storeu_ps(mn + c, load_halves16(mn_h + 2 * c));
  for (int pc = 0; pc < np; ++pc) {
    const __m512 a = load_halves16(sc_h + 64 * pc), b = load_halves16(sc_h + 64 * pc + 32);
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    const __m512 inv = _mm512_set1_ps(intt::inverse_step(1.0f, m));
    _mm512_storeu_ps(sc + 32 * pc, _mm512_mul_ps(a, inv));
    _mm512_storeu_ps(sc + 32 * pc + 16, _mm512_mul_ps(b, inv));
    for (int r = 0; r < n_q; ++r) step[r * np + pc] = qstep[r * np + pc] * m;
  }
  for (int r = 0; r < n_q; ++r) {
    const int64_t o = static_cast<int64_t>(r) * d;
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < d; c += 16) {
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + o + c), _mm512_loadu_ps(mn + c), acc);
      const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(qhat + o + c), _mm512_loadu_ps(sc + c)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + o + c), _mm512_cvtsepi32_epi8(qi));
    }
    c0[r] = _mm512_reduce_add_ps(acc);
  }
}

// ---------------- int_tile_loops.inc's hooks ----------------

struct Avx512Vnni {};  // the one flavour of this tier (Isa)

template <int B, bool kWide, class Isa>
inline void size_rows(ScoreScratch&, int, int, int) {}
template <int B, bool kWide, class Isa>
inline void rounded_rows(ScoreScratch&, int, int, int) {}
template <int B, class Isa>
inline QRows query_rows(ScoreScratch& s, int r0, int d, int np) {
  return QRows{s.hi.data() + static_cast<int64_t>(r0) * d, s.lo.data() + static_cast<int64_t>(r0) * d,
               s.step.data() + static_cast<int64_t>(r0) * np};
}
inline void abs_max_rows(const float* q, int n_q, int d, float* qmax) {
  for (int r = 0; r < n_q; ++r)
    for (int c = 0; c < d; c += 16)
      _mm512_storeu_ps(qmax + c, _mm512_max_ps(_mm512_loadu_ps(qmax + c),
                                               _mm512_abs_ps(_mm512_loadu_ps(q + static_cast<int64_t>(r) * d + c))));
}
inline void load_channel_meta(const uint8_t* blk, int d, float* sc, float* mn) {
  for (int i = 0; i < d; i += 16) {
    _mm512_storeu_ps(sc + i, load_halves16(blk + 2 * i));
    _mm512_storeu_ps(mn + i, load_halves16(blk + 2 * d + 2 * i));
  }
}
inline float dot_min(const float* qr, const float* mn, int d) {
  __m512 acc = _mm512_setzero_ps();
  for (int i = 0; i < d; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qr + i), _mm512_loadu_ps(mn + i), acc);
  return _mm512_reduce_add_ps(acc);
}

// ---------------- accumulate ----------------

using intt::kRunBlocks;  // 16-token blocks sharing one probability step (64 tokens)

struct AccScratch {
  // p' rounded (128 hi + lo, 7 bits each), four rows packed per quad: byte 16 j + 4 r of
  // [k][b][64] holds row r's quad j (tokens 4j..4j+3) of block b of the run, group k.
  std::vector<int8_t> hi, lo;
  std::vector<float> step;          // [RB][ng]
  std::vector<float> smax;          // [ng]
  std::vector<float> ph;            // [RB][64] p / max p of the run
  std::vector<float> mt;            // [RB][ng][16] lanes of sum_t p_t min_{t,g} + centre * residuals
};

// 4 rows of 16 int32 in [-128, 127] -> 64 bytes, row r's elements 4j..4j+3 at byte 16 j + 4 r
// (vpackssdw / vpacksswb work within 128-bit lanes: lane j keeps elements 4j..4j+3 of each row).
inline __m512i pack_rows4(const __m512i* v) {
  return _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3]));
}

template <int B, int RB, bool kWide, class Isa>
void accumulate_rows(const float* p, int64_t ld, const SegmentView& seg, const ValueTileShape& sh,
                                    float* out, AccScratch& s) {
  // Codes are the u8 operand, probability halves the s8 one (a broadcast memory operand):
  // 7 bits each, pq = 128 hi + lo (14 bits) or pq = lo (7 bits).
  constexpr float kQMax = kWide ? 16383.0f : 127.0f;
  constexpr int64_t kTb = 32 * B;
  constexpr int kRun = 16 * kRunBlocks;
  const int d = sh.d, g = sh.g, ng = d / g, units = d / 16;
  s.hi.resize(static_cast<size_t>(ng) * kRunBlocks * 64);
  s.lo.resize(s.hi.size());
  s.step.resize(static_cast<size_t>(RB) * ng);
  s.smax.resize(ng);
  s.ph.resize(static_cast<size_t>(RB) * kRun);
  s.mt.assign(static_cast<size_t>(RB) * ng * 16, 0.0f);
  int8_t* const hi = s.hi.data();
  int8_t* const lo = s.lo.data();
  float* const step = s.step.data();  // [RB * ng]
  float* const mt = s.mt.data();      // [RB * ng][16]
  float* const ph = s.ph.data();      // [RB][kRun] p^ of the run
  float* const smax = s.smax.data();  // [ng]
  float pmax[RB];
  const __m512i k127 = _mm512_set1_epi32(127);
  const __m512 centre = _mm512_set1_ps(0.5f * ((1 << B) - 1));
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
    // Step per (row, group): max_t p_t * max_t scale_{t,g} over the run bounds max p' and
    // needs RB + ng reductions instead of RB * ng. p' / step = p^ * s^ with p^ = p / max p
    // (per row, in [0, 1]) and s^ = scale * kQMax / max scale (per group), each scaled once
    // per run: one multiply per (row, group, 16 tokens) rounds p'.
    for (int r = 0; r < RB; ++r) {
      __m512 mx = _mm512_setzero_ps();
      for (int b = 0; b < kb; ++b) mx = _mm512_max_ps(mx, _mm512_loadu_ps(p + r * ld + (b0 + b) * 16));
      pmax[r] = _mm512_reduce_max_ps(mx);
    }
    for (int k = 0; k < ng; ++k) {
      __m512 mx = _mm512_setzero_ps();
      for (int b = 0; b < kb; ++b) mx = _mm512_max_ps(mx, load_halves16(blk[b] + 2 * 16 * k));
      smax[k] = _mm512_reduce_max_ps(mx);
    }
    for (int r = 0; r < RB; ++r)
      for (int k = 0; k < ng; ++k) step[r * ng + k] = pmax[r] * smax[k] / kQMax;
    for (int r = 0; r < RB; ++r) {
      const __m512 pinv = _mm512_set1_ps(intt::inverse_step(1.0f, pmax[r]));
      for (int b = 0; b < kb; ++b)
        _mm512_storeu_ps(ph + r * kRun + 16 * b, _mm512_mul_ps(_mm512_loadu_ps(p + r * ld + (b0 + b) * 16), pinv));
    }
    for (int k = 0; k < ng; ++k) {
      // sum_t p^_t min_{t,k} over the run; narrow: sum_t of p' / step and of its rounding.
      __m512 mta[RB], vsum[RB];
      __m512i qsum[RB];
      for (int r = 0; r < RB; ++r) {
        mta[r] = vsum[r] = _mm512_setzero_ps();
        qsum[r] = _mm512_setzero_si512();
      }
      const __m512 sinv = _mm512_set1_ps(intt::inverse_step(kQMax, smax[k]));
      for (int b = 0; b < kb; ++b) {
        const __m512 sv = _mm512_mul_ps(load_halves16(blk[b] + 2 * 16 * k), sinv);
        const __m512 mv = load_halves16(blk[b] + 2 * 16 * (ng + k));
        __m512i qh[4], ql[4];
        for (int r = 0; r < 4; ++r) qh[r] = ql[r] = _mm512_setzero_si512();
        for (int r = 0; r < RB; ++r) {
          const __m512 pv = _mm512_loadu_ps(ph + r * kRun + 16 * b);
          const __m512 v = _mm512_mul_ps(pv, sv);  // p' / step
          const __m512i qi = _mm512_cvtps_epi32(v);
          if constexpr (kWide) {
            qh[r] = _mm512_srli_epi32(qi, 7);
            ql[r] = _mm512_and_si512(qi, k127);
          } else {
            ql[r] = qi;
            vsum[r] = _mm512_add_ps(vsum[r], v);
            qsum[r] = _mm512_add_epi32(qsum[r], qi);
          }
          mta[r] = _mm512_fmadd_ps(pv, mv, mta[r]);
        }
        const int64_t at = (static_cast<int64_t>(k) * kRunBlocks + b) * 64;
        if constexpr (kWide) _mm512_storeu_si512(hi + at, pack_rows4(qh));
        _mm512_storeu_si512(lo + at, pack_rows4(ql));
      }
      for (int r = 0; r < RB; ++r) {
        float* m = mt + (r * ng + k) * 16;
        __m512 sum = _mm512_fmadd_ps(mta[r], _mm512_set1_ps(pmax[r]), _mm512_loadu_ps(m));
        // the residuals times the code centre: sum_t (p'_t - step * pq_t) * (2^B - 1) / 2
        // (qsum <= 64 * 127: exact in f32)
        if constexpr (!kWide) {
          const __m512 res = _mm512_sub_ps(vsum[r], _mm512_cvtepi32_ps(qsum[r]));
          sum = _mm512_fmadd_ps(res, _mm512_mul_ps(centre, _mm512_set1_ps(step[r * ng + k])), sum);
        }
        _mm512_storeu_ps(m, sum);
      }
    }
    // Integer dots: per 16-channel unit, the run's blocks, every row.
    for (int u = 0; u < units; ++u) {
      const int k = u * 16 / g;
      __m512i ah[RB], al[RB];
      for (int r = 0; r < RB; ++r) ah[r] = al[r] = _mm512_setzero_si512();
      for (int b = 0; b < kn; ++b) prefetch_lines(next[b], u * lines / units, (u + 1) * lines / units);
      for (int b = 0; b < kb; ++b) {
        __m512i qd[4];
        unpack_quads<B>(blk[b] + sh.meta_bytes + u * kTb, qd);
        const int64_t at = (static_cast<int64_t>(k) * kRunBlocks + b) * 64;
        for (int r = 0; r < RB; ++r)
          for (int j = 0; j < 4; ++j) {
            if constexpr (kWide)
              ah[r] = _mm512_dpbusd_epi32(ah[r], qd[j], _mm512_set1_epi32(load_i32(hi + at + 16 * j + 4 * r)));
            al[r] = _mm512_dpbusd_epi32(al[r], qd[j], _mm512_set1_epi32(load_i32(lo + at + 16 * j + 4 * r)));
          }
      }
      // Each int32 sum is exact in f32 (< 2^24); one rounding when combined.
      for (int r = 0; r < RB; ++r) {
        float* o = out + static_cast<int64_t>(r) * d + 16 * u;
        const __m512 dot = kWide ? _mm512_fmadd_ps(_mm512_cvtepi32_ps(ah[r]), _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(al[r]))
                                 : _mm512_cvtepi32_ps(al[r]);
        _mm512_storeu_ps(o, _mm512_fmadd_ps(dot, _mm512_set1_ps(step[r * ng + k]), _mm512_loadu_ps(o)));
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int k = 0; k < ng; ++k) {
      const float m = _mm512_reduce_add_ps(_mm512_loadu_ps(mt + (r * ng + k) * 16));
      float* o = out + static_cast<int64_t>(r) * d + k * g;
      for (int i = 0; i < g; ++i) o[i] += m;
    }
}

#include "kv/codecs/int_tile_loops.inc"

}  // namespace vlkv::tilek
