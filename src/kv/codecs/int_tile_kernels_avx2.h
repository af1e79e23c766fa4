// AVX2 (+FMA, F16C) and AVX-VNNI fused ops of the integer codecs on tiled code layouts
// (int_tiles.h): the algorithm and the rounding of int_tile_kernels_avx512.h (same bounds,
// same per-lane float operations, so results match the AVX-512 VNNI path), on 8 lanes, a
// tile read as two 32-byte halves (lanes 0-7, 8-15). The 8-bit dots:
//   kVnni:  vpdpbusd (AVX-VNNI, 256-bit), one per quad, as AVX-512;
//   AVX2:   the llama.cpp sequence: vpmaddubsw (u8 codes x s8 query -> s16 pairs) for the four
//           quads of a 16-code unit summed in s16, then one vpmaddwd by 1 into the s32 lanes.
//           No saturation: codes < 16, |query byte| <= 128, so |sum| <= 4 * 2 * 15 * 128 < 2^15.
//           8-bit codes: vpmaddubsw would saturate (2 * 255 * 128 > 2^15), so they take dot_words8.
//
// Included only inside a VLKV_TARGET_BEGIN region (int_kernels_avx2.cpp, int_kernels_avx2vnni.cpp):
// everything here is in an unnamed namespace so each file's copy keeps its own target.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kv/codec.h"
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_tiles.h"

namespace vlkv::intk {
namespace {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
inline __m256 load_halves8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 16 int32 (a: elements 0-7, b: 8-15) -> 16 bytes, saturated to s8 (as vpmovsdb).
inline __m128i pack_s8(__m256i a, __m256i b) {
  const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
  return _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

// AVX-VNNI: acc (s32 lanes) += sum over j < 4 of the byte dot of quads[j] (u8) with q[j] (s8 quads).
inline __m256i dot4_vnni(__m256i acc, const __m256i* quads, const int8_t* q) {
  for (int j = 0; j < 4; ++j) acc = _mm256_dpbusd_avx_epi32(acc, quads[j], _mm256_set1_epi32(load_i32(q + 4 * j)));
  return acc;
}

// AVX2 without VNNI: the s16 pair sums of vpmaddubsw (one 16-code unit: |sum| <= 4 * 2 *
// (2^B - 1) * 128) are added over kS16Units units before one vpmaddwd widens them, within 2^15.
template <int B>
constexpr int kS16Units = B == 4 ? 2 : 8;
inline __m256i sum4_s16(__m256i s16, const __m256i* quads, const int8_t* q) {
  for (int j = 0; j < 4; ++j) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(quads[j], _mm256_set1_epi32(load_i32(q + 4 * j))));
  return s16;
}
inline __m256i widen_s16(__m256i acc, __m256i s16) { return _mm256_add_epi32(acc, _mm256_madd_epi16(s16, _mm256_set1_epi16(1))); }

// AVX2 without VNNI, 8-bit codes: vpmaddubsw's s16 pair sums would saturate (2 * 255 * 128 >
// 2^15; splitting codes into nibbles would double the maddubs and still need widening), so the
// codes are widened to u16 and vpmaddwd multiplies them with the whole rounded input
// qi = 128 hi + lo as s16 words (|qi| <= 16383). vpshufb picks elements 0,1 (e01) and 2,3 (e23)
// of each lane's quad as zero-extended words, so each vpmaddwd pair lands in that lane's own
// dword: exact int32 (2 * 255 * 16383 < 2^31), summed per lane in s32 (within int32 for <= 512
// channels or 64 tokens: 512 * 255 * 16383 < 2^31), lanes in order. That exact total
// T = 128 ah + al is what the VNNI paths round once in f32 from their exact parts
// (fmadd(ah, 128, al)), so cvt(T) gives the same bits.
// widen_codes8: quad j of half h of an 8-bit tile -> e01, e23 (once per quad, for every row);
// dot_words8: words [4] = s16 inputs of the quad's four elements; acc: s32 per lane.
inline void widen_codes8(const uint8_t* tile, int h, int j, __m256i* e01, __m256i* e23) {
  const __m256i quad = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 64 * j + 32 * h));
  const __m256i k01 = _mm256_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1,
                                       0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1);
  *e01 = _mm256_shuffle_epi8(quad, k01);
  const __m256i k23 = _mm256_setr_epi8(2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14, -1, 15, -1,
                                       2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14, -1, 15, -1);
  *e23 = _mm256_shuffle_epi8(quad, k23);
}
inline void dot_words8(__m256i e01, __m256i e23, const int16_t* words, __m256i* acc) {
  *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(e01, _mm256_set1_epi32(load_i32(words))));
  *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(e23, _mm256_set1_epi32(load_i32(words + 2))));
}
// 16 int32 (a: elements 0-7, b: 8-15) -> 16 s16 words in order (|values| < 2^15).
inline __m256i pack_words(__m256i a, __m256i b) { return _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8); }
// Rounded inputs as s16 words for dot_words8: w[c] = 128 hi[c] + lo[c] (kWide) or lo[c]; n % 16 == 0.
template <bool kWide>
inline void words_from_bytes(const int8_t* hi, const int8_t* lo, int64_t n, int16_t* w) {
  for (int64_t c = 0; c < n; c += 16) {
    __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + c)));
    if constexpr (kWide)
      v = _mm256_add_epi16(v, _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hi + c))), 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + c), v);
  }
}

// Half h (lanes 8h..8h+7) of one tile -> quads[j]: lane l = 4 codes (elements 4j..4j+3).
template <int B>
inline void unpack_quads_half(const uint8_t* tile, int h, __m256i* quads) {
  if constexpr (B == 2) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32 * h));
    const __m256i k3 = _mm256_set1_epi8(3);
    quads[0] = _mm256_and_si256(w, k3);
    quads[1] = _mm256_and_si256(_mm256_srli_epi16(w, 2), k3);
    quads[2] = _mm256_and_si256(_mm256_srli_epi16(w, 4), k3);
    quads[3] = _mm256_and_si256(_mm256_srli_epi16(w, 6), k3);
  } else if constexpr (B == 8) {  // one 64-byte vector per quad
    for (int j = 0; j < 4; ++j) quads[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 64 * j + 32 * h));
  } else {
    static_assert(B == 4, "2-, 4- and 8-bit tiles");
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32 * h));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 64 + 32 * h));
    const __m256i kf = _mm256_set1_epi8(15);
    quads[0] = _mm256_and_si256(w0, kf);
    quads[1] = _mm256_and_si256(_mm256_srli_epi16(w0, 4), kf);
    quads[2] = _mm256_and_si256(w1, kf);
    quads[3] = _mm256_and_si256(_mm256_srli_epi16(w1, 4), kf);
  }
}

// ah / al (s32 lanes, half h) += the byte dots of RB rows with n tiles of B-bit codes (8-bit
// ones only with VNNI; without, dot_words8): tile i's codes at tile(i), row r's input bytes
// at hi / lo + at(r, i). AVX-VNNI: vpdpbusd over all n tiles; AVX2: vpmaddubsw s16 sums over
// kS16Units tiles, then widened. Integer sums, exact in any grouping: the same totals.
template <int B, int RB, bool kWide, class Isa, class TileAt, class InputAt>
inline void dot_tiles(int n, int h, TileAt tile, InputAt at, const int8_t* hi, const int8_t* lo, __m256i* ah,
                      __m256i* al) {
  const int chunk = Isa::kVnni ? n : kS16Units<B>;
  for (int i0 = 0; i0 < n; i0 += chunk) {
    __m256i sh[RB], sl[RB];
    for (int r = 0; r < RB; ++r) sh[r] = sl[r] = _mm256_setzero_si256();
    for (int i = i0; i < std::min(n, i0 + chunk); ++i) {
      __m256i qd[4];
      unpack_quads_half<B>(tile(i), h, qd);
      for (int r = 0; r < RB; ++r) {
        const int64_t o = at(r, i);
        if constexpr (Isa::kVnni) {
          if constexpr (kWide) sh[r] = dot4_vnni(sh[r], qd, hi + o);
          sl[r] = dot4_vnni(sl[r], qd, lo + o);
        } else {
          if constexpr (kWide) sh[r] = sum4_s16(sh[r], qd, hi + o);
          sl[r] = sum4_s16(sl[r], qd, lo + o);
        }
      }
    }
    for (int r = 0; r < RB; ++r) {
      if constexpr (kWide) ah[r] = Isa::kVnni ? _mm256_add_epi32(ah[r], sh[r]) : widen_s16(ah[r], sh[r]);
      al[r] = Isa::kVnni ? _mm256_add_epi32(al[r], sl[r]) : widen_s16(al[r], sl[r]);
    }
  }
}

// int32 sums -> float dot: kWide 128 hi + lo (each exact in f32, one rounding), else lo.
template <bool kWide>
inline __m256 combine(__m256i ah, __m256i al) {
  return kWide ? _mm256_fmadd_ps(_mm256_cvtepi32_ps(ah), _mm256_set1_ps(128.0f), _mm256_cvtepi32_ps(al))
               : _mm256_cvtepi32_ps(al);
}

// As tilek::round_q: qi = round(q (* mul) * inv); kWide hi = qi >> 7, lo = qi & 127, else lo = qi (s8).
//   q, mul, inv: [n], n % 16 == 0
template <bool kWide>
inline void round_q(const float* q, const float* mul, const float* inv, int n, int8_t* hi, int8_t* lo) {
  const __m256i k127 = _mm256_set1_epi32(127);
  for (int c = 0; c < n; c += 16) {
    __m256i qi[2];
    for (int e = 0; e < 2; ++e) {
      __m256 v = _mm256_mul_ps(_mm256_loadu_ps(q + c + 8 * e), _mm256_loadu_ps(inv + c + 8 * e));
      if (mul) v = _mm256_mul_ps(v, _mm256_loadu_ps(mul + c + 8 * e));
      qi[e] = _mm256_cvtps_epi32(v);  // round to nearest even, as the AVX-512 path
    }
    if constexpr (kWide) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + c),
                       pack_s8(_mm256_and_si256(qi[0], k127), _mm256_and_si256(qi[1], k127)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + c),
                       pack_s8(_mm256_srai_epi32(qi[0], 7), _mm256_srai_epi32(qi[1], 7)));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + c), pack_s8(qi[0], qi[1]));
    }
  }
}

// max over channels [c0, c0 + n) of |v (* mul)|; n % 8 == 0.
inline float piece_max(const float* v, const float* mul, int c0, int n) {
  __m256 mx = _mm256_setzero_ps();
  for (int c = c0; c < c0 + n; c += 8) {
    __m256 x = _mm256_loadu_ps(v + c);
    if (mul) x = _mm256_mul_ps(x, _mm256_loadu_ps(mul + c));
    mx = _mm256_max_ps(mx, abs8(x));
  }
  return hmax8(mx);
}

constexpr float query_levels(bool wide) { return wide ? 16383.0f : 127.0f; }

// ---------------- scores ----------------

struct QRows {
  const int8_t* hi;   // [RB, d]
  const int8_t* lo;
  const float* step;  // [RB, d / P]
  const int16_t* w = nullptr;  // B == 8 without VNNI: [RB, d] 128 hi + lo (dot_words8)
};

// As tilek::key_tile_rows, for the 8 tokens of half h of each tile.
template <int B, int RB, bool kPerToken, bool kWide, class Isa>
void key_tile_half(const uint8_t* codes, int h, int d, int P, QRows q, const uint8_t* sc_h, const uint8_t* mn_h,
                   const float* qsum, const float* c0, float scale, float* lg, int64_t ld) {
  constexpr bool kVnni = Isa::kVnni;
  constexpr int64_t kTb = 32 * B;
  const int np = d / P, upp = P / 16;
  __m256 accf[RB];
  for (int r = 0; r < RB; ++r) accf[r] = kPerToken ? _mm256_setzero_ps() : _mm256_set1_ps(c0[r]);
  for (int pc = 0; pc < np; ++pc) {
    __m256i ah[RB], al[RB];
    for (int r = 0; r < RB; ++r) ah[r] = al[r] = _mm256_setzero_si256();
    if constexpr (B == 8 && !kVnni) {  // al = the exact total 128 ah + al, ah = 0 (dot_words8)
      for (int u = pc * upp; u < (pc + 1) * upp; ++u) {
        for (int j = 0; j < 4; ++j) {
          __m256i e01, e23;
          widen_codes8(codes + u * kTb, h, j, &e01, &e23);
          for (int r = 0; r < RB; ++r)
            dot_words8(e01, e23, q.w + static_cast<int64_t>(r) * d + 16 * u + 4 * j, &al[r]);
        }
      }
    } else {  // the piece's units
      const int u0 = pc * upp;
      dot_tiles<B, RB, kWide, Isa>(
          upp, h, [&](int i) { return codes + (u0 + i) * kTb; },
          [&](int r, int i) { return static_cast<int64_t>(r) * d + 16 * (u0 + i); }, q.hi, q.lo, ah, al);
    }
    const __m256 sv = kPerToken ? load_halves8(sc_h + 2 * (16 * pc + 8 * h)) : _mm256_set1_ps(1.0f);
    for (int r = 0; r < RB; ++r) {
      accf[r] = _mm256_fmadd_ps(combine<kWide>(ah[r], al[r]), _mm256_mul_ps(sv, _mm256_set1_ps(q.step[r * np + pc])),
                                accf[r]);
      if constexpr (kPerToken)
        accf[r] = _mm256_fmadd_ps(load_halves8(mn_h + 2 * (16 * pc + 8 * h)), _mm256_set1_ps(qsum[r * np + pc]), accf[r]);
    }
  }
  for (int r = 0; r < RB; ++r) _mm256_storeu_ps(lg + r * ld + 8 * h, _mm256_mul_ps(accf[r], _mm256_set1_ps(scale)));
}

// The 16 tokens of a tile as its two halves.
template <int B, int RB, bool kPerToken, bool kWide, class Isa>
void key_tile_rows(const uint8_t* codes, int d, int P, QRows q, const uint8_t* sc_h, const uint8_t* mn_h,
                   const float* qsum, const float* c0, float scale, float* lg, int64_t ld) {
  for (int h = 0; h < 2; ++h) key_tile_half<B, RB, kPerToken, kWide, Isa>(codes, h, d, P, q, sc_h, mn_h, qsum, c0, scale, lg, ld);
}

struct ScoreScratch {
  std::vector<int8_t> hi, lo;
  std::vector<int16_t> w;  // B == 8 without VNNI: [n_q, d] (dot_words8)
  std::vector<float> step, inv, qsum, c0, sc, mn, qmax, qhat, qstep;
};

inline void set_piece_step(ScoreScratch& s, int r, int pc, int d, int P, float levels, float m) {
  s.step[static_cast<size_t>(r) * (d / P) + pc] = m / levels;
  const __m256 iv = _mm256_set1_ps(intt::inverse_step(levels, m));
  for (int c = pc * P; c < (pc + 1) * P; c += 8) _mm256_storeu_ps(&s.inv[static_cast<size_t>(r) * d + c], iv);
}

// As tilek::wide_channel_rows (per-channel block, dot=16: one step for every row, the
// query rounded and c0 = q . min in one pass over the channels, the f16 metadata read in
// place), with the same per-lane operations and the AVX-512 path's summation order.
inline void wide_channel_rows(const float* q, int n_q, int d, const float* qmax, const uint8_t* sc_h,
                              const uint8_t* mn_h, int8_t* hi, int8_t* lo, float* step, float* c0) {
  constexpr float kLevels = query_levels(true);
  __m256 mx = _mm256_setzero_ps();
  for (int c = 0; c < d; c += 8)
    mx = _mm256_max_ps(mx, abs8(_mm256_mul_ps(_mm256_loadu_ps(qmax + c), load_halves8(sc_h + 2 * c))));
  const float m = hmax8(mx);
  const __m256 iv = _mm256_set1_ps(intt::inverse_step(kLevels, m));
  for (int r = 0; r < n_q; ++r) step[r] = m / kLevels;
  const __m256i k127 = _mm256_set1_epi32(127);
  for (int r0 = 0; r0 < n_q; r0 += 4) {
    const int rb = std::min(4, n_q - r0);
    __m256 a0[4], a1[4];
    for (int k = 0; k < 4; ++k) a0[k] = a1[k] = _mm256_setzero_ps();
    for (int c = 0; c < d; c += 16) {
      const __m256 inv0 = _mm256_mul_ps(load_halves8(sc_h + 2 * c), iv);
      const __m256 inv1 = _mm256_mul_ps(load_halves8(sc_h + 2 * c + 16), iv);
      const __m256 mn0 = load_halves8(mn_h + 2 * c), mn1 = load_halves8(mn_h + 2 * c + 16);
      for (int k = 0; k < rb; ++k) {
        const int64_t at = static_cast<int64_t>(r0 + k) * d + c;
        const __m256 q0 = _mm256_loadu_ps(q + at), q1 = _mm256_loadu_ps(q + at + 8);
        const __m256i qi0 = _mm256_cvtps_epi32(_mm256_mul_ps(q0, inv0));
        const __m256i qi1 = _mm256_cvtps_epi32(_mm256_mul_ps(q1, inv1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + at),
                         pack_s8(_mm256_and_si256(qi0, k127), _mm256_and_si256(qi1, k127)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + at), pack_s8(_mm256_srai_epi32(qi0, 7), _mm256_srai_epi32(qi1, 7)));
        a0[k] = _mm256_fmadd_ps(q0, mn0, a0[k]);
        a1[k] = _mm256_fmadd_ps(q1, mn1, a1[k]);
      }
    }
    for (int k = 0; k < rb; ++k) c0[r0 + k] = hsum8(_mm256_add_ps(a1[k], a0[k]));
  }
}

// As tilek::narrow_channel_rows (per-channel blocks at dot=8, 32-channel
// pieces): the same per-lane operations, the AVX-512 path's summation order for c0.
inline void narrow_channel_rows(const float* q, const float* qhat, const float* qstep, int n_q, int d,
                                const uint8_t* sc_h, const uint8_t* mn_h, float* sc, float* mn, int8_t* lo, float* step,
                                float* c0) {
  const int np = d / 32;
  for (int c = 0; c < d; c += 8) _mm256_storeu_ps(mn + c, load_halves8(mn_h + 2 * c));
  for (int pc = 0; pc < np; ++pc) {
    __m256 v[4], mx = _mm256_setzero_ps();
    for (int e = 0; e < 4; ++e) {
      v[e] = load_halves8(sc_h + 64 * pc + 16 * e);
      mx = _mm256_max_ps(mx, abs8(v[e]));
    }
    const float m = hmax8(mx);
    const __m256 inv = _mm256_set1_ps(intt::inverse_step(1.0f, m));
    for (int e = 0; e < 4; ++e) _mm256_storeu_ps(sc + 32 * pc + 8 * e, _mm256_mul_ps(v[e], inv));
    for (int r = 0; r < n_q; ++r) step[r * np + pc] = qstep[r * np + pc] * m;
  }
  for (int r = 0; r < n_q; ++r) {
    const int64_t o = static_cast<int64_t>(r) * d;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (int c = 0; c < d; c += 16) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + o + c), _mm256_loadu_ps(mn + c), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + o + c + 8), _mm256_loadu_ps(mn + c + 8), a1);
      const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(qhat + o + c), _mm256_loadu_ps(sc + c)));
      const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(qhat + o + c + 8), _mm256_loadu_ps(sc + c + 8)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + o + c), pack_s8(q0, q1));
    }
    c0[r] = hsum8(_mm256_add_ps(a1, a0));
  }
}

// ---------------- int_tile_loops.inc's hooks ----------------

template <bool V>
struct Avx2Dots {
  static constexpr bool kVnni = V;  // AVX-VNNI's vpdpbusd, else vpmaddubsw / vpmaddwd
};
template <int B, class Isa>
constexpr bool kWordDots = B == 8 && !Isa::kVnni;  // 8-bit codes without VNNI: dot_words8

template <int B, bool kWide, class Isa>
inline void size_rows(ScoreScratch& s, int, int, int) {
  if constexpr (kWordDots<B, Isa>) s.w.resize(s.hi.size());
}
template <int B, bool kWide, class Isa>
inline void rounded_rows(ScoreScratch& s, int n_q, int d, int) {
  if constexpr (kWordDots<B, Isa>) words_from_bytes<kWide>(s.hi.data(), s.lo.data(), static_cast<int64_t>(n_q) * d, s.w.data());
}
template <int B, class Isa>
inline QRows query_rows(ScoreScratch& s, int r0, int d, int np) {
  return QRows{s.hi.data() + static_cast<int64_t>(r0) * d, s.lo.data() + static_cast<int64_t>(r0) * d,
               s.step.data() + static_cast<int64_t>(r0) * np,
               kWordDots<B, Isa> ? s.w.data() + static_cast<int64_t>(r0) * d : nullptr};
}
inline void abs_max_rows(const float* q, int n_q, int d, float* qmax) {
  for (int r = 0; r < n_q; ++r)
    for (int c = 0; c < d; c += 8)
      _mm256_storeu_ps(qmax + c, _mm256_max_ps(_mm256_loadu_ps(qmax + c), abs8(_mm256_loadu_ps(q + static_cast<int64_t>(r) * d + c))));
}
inline void load_channel_meta(const uint8_t* blk, int d, float* sc, float* mn) {
  for (int i = 0; i < d; i += 8) {
    _mm256_storeu_ps(sc + i, load_halves8(blk + 2 * i));
    _mm256_storeu_ps(mn + i, load_halves8(blk + 2 * d + 2 * i));
  }
}
// sum_c q_c min_c in the lane order of the AVX-512 path (16 lanes as two halves, then
// _mm512_reduce_add_ps's order), so both tiers give the same bits.
inline float dot_min(const float* qr, const float* mn, int d) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  for (int i = 0; i < d; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + i), _mm256_loadu_ps(mn + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + i + 8), _mm256_loadu_ps(mn + i + 8), a1);
  }
  return hsum8(_mm256_add_ps(a1, a0));
}

// ---------------- accumulate ----------------

using intt::kRunBlocks;  // 16-token blocks sharing one probability step (64 tokens)

struct AccScratch {
  std::vector<int8_t> hi, lo;  // [RB][ng][64]
  std::vector<int16_t> w;      // B == 8 without VNNI: [RB][ng][64] p' rounded as s16 (dot_words8)
  std::vector<float> step;   // [RB][ng]
  std::vector<float> smax;   // [ng]
  std::vector<float> ph;     // [RB][64] p / max p of the run
  std::vector<float> mt;     // [RB][ng][16]
};

// As tilek::accumulate_rows (same steps and rounding; lanes in two halves of 8).
template <int B, int RB, bool kWide, class Isa>
void accumulate_rows(const float* p, int64_t ld, const SegmentView& seg, const intt::ValueTileShape& sh, float* out,
                     AccScratch& s) {
  constexpr bool kVnni = Isa::kVnni;
  constexpr float kQMax = kWide ? 16383.0f : 127.0f;
  constexpr int64_t kTb = 32 * B;
  constexpr int kRun = 16 * kRunBlocks;
  const int d = sh.d, g = sh.g, ng = d / g, units = d / 16;
  s.hi.resize(static_cast<size_t>(RB) * ng * kRun);
  s.lo.resize(s.hi.size());
  constexpr bool kWords = B == 8 && !kVnni;
  if constexpr (kWords) s.w.resize(s.hi.size());
  s.step.resize(static_cast<size_t>(RB) * ng);
  s.smax.resize(ng);
  s.ph.resize(static_cast<size_t>(RB) * kRun);
  s.mt.assign(static_cast<size_t>(RB) * ng * 16, 0.0f);
  int8_t* const hi = s.hi.data();
  int8_t* const lo = s.lo.data();
  int16_t* const words = s.w.data();
  float* const step = s.step.data();
  float* const mt = s.mt.data();
  float* const ph = s.ph.data();
  float* const smax = s.smax.data();
  float pmax[RB];
  const __m256i k127 = _mm256_set1_epi32(127);
  const __m256 centre = _mm256_set1_ps(0.5f * ((1 << B) - 1));
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
    // As the AVX-512 path: p' / step = p^ * s^ (p^ = p / max p per row, s^ = scale * kQMax /
    // max scale per group, each scaled once per run).
    for (int r = 0; r < RB; ++r) {
      __m256 mx = _mm256_setzero_ps();
      for (int b = 0; b < kb; ++b)
        for (int e = 0; e < 2; ++e) mx = _mm256_max_ps(mx, _mm256_loadu_ps(p + r * ld + (b0 + b) * 16 + 8 * e));
      pmax[r] = hmax8(mx);
    }
    for (int k = 0; k < ng; ++k) {
      __m256 mx = _mm256_setzero_ps();
      for (int b = 0; b < kb; ++b)
        for (int e = 0; e < 2; ++e) mx = _mm256_max_ps(mx, load_halves8(blk[b] + 2 * (16 * k + 8 * e)));
      smax[k] = hmax8(mx);
    }
    for (int r = 0; r < RB; ++r)
      for (int k = 0; k < ng; ++k) step[r * ng + k] = pmax[r] * smax[k] / kQMax;
    for (int r = 0; r < RB; ++r) {
      const __m256 pinv = _mm256_set1_ps(intt::inverse_step(1.0f, pmax[r]));
      for (int i = 0; i < 16 * kb; i += 8)
        _mm256_storeu_ps(ph + r * kRun + i, _mm256_mul_ps(_mm256_loadu_ps(p + r * ld + b0 * 16 + i), pinv));
    }
    for (int k = 0; k < ng; ++k) {
      __m256 mta[RB][2], vsum[RB][2];
      __m256i qsum[RB][2];
      for (int r = 0; r < RB; ++r)
        for (int e = 0; e < 2; ++e) {
          mta[r][e] = vsum[r][e] = _mm256_setzero_ps();
          qsum[r][e] = _mm256_setzero_si256();
        }
      const __m256 sinv = _mm256_set1_ps(intt::inverse_step(kQMax, smax[k]));
      for (int b = 0; b < kb; ++b) {
        __m256 sv[2], mv[2];
        for (int e = 0; e < 2; ++e) {
          sv[e] = _mm256_mul_ps(load_halves8(blk[b] + 2 * (16 * k + 8 * e)), sinv);
          mv[e] = load_halves8(blk[b] + 2 * (16 * (ng + k) + 8 * e));
        }
        for (int r = 0; r < RB; ++r) {
          const int64_t at = static_cast<int64_t>(r * ng + k) * kRun + 16 * b;
          __m256i qi[2];
          for (int e = 0; e < 2; ++e) {
            const __m256 pv = _mm256_loadu_ps(ph + r * kRun + 16 * b + 8 * e);
            const __m256 v = _mm256_mul_ps(pv, sv[e]);  // p' / step
            qi[e] = _mm256_cvtps_epi32(v);
            if constexpr (!kWide) {
              vsum[r][e] = _mm256_add_ps(vsum[r][e], v);
              qsum[r][e] = _mm256_add_epi32(qsum[r][e], qi[e]);
            }
            mta[r][e] = _mm256_fmadd_ps(pv, mv[e], mta[r][e]);
          }
          if constexpr (kWords) {  // the dots read only the words
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + at), pack_words(qi[0], qi[1]));
          } else if constexpr (kWide) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + at),
                             pack_s8(_mm256_srli_epi32(qi[0], 7), _mm256_srli_epi32(qi[1], 7)));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + at),
                             pack_s8(_mm256_and_si256(qi[0], k127), _mm256_and_si256(qi[1], k127)));
          } else {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + at), pack_s8(qi[0], qi[1]));
          }
        }
      }
      for (int r = 0; r < RB; ++r)
        for (int e = 0; e < 2; ++e) {
          float* m = mt + (r * ng + k) * 16 + 8 * e;
          __m256 sum = _mm256_fmadd_ps(mta[r][e], _mm256_set1_ps(pmax[r]), _mm256_loadu_ps(m));
          if constexpr (!kWide) {
            const __m256 res = _mm256_sub_ps(vsum[r][e], _mm256_cvtepi32_ps(qsum[r][e]));
            sum = _mm256_fmadd_ps(res, _mm256_mul_ps(centre, _mm256_set1_ps(step[r * ng + k])), sum);
          }
          _mm256_storeu_ps(m, sum);
        }
    }
    for (int u = 0; u < units; ++u) {
      const int k = u * 16 / g;
      for (int b = 0; b < kn; ++b) prefetch_lines(next[b], u * lines / units, (u + 1) * lines / units);
      for (int h = 0; h < 2; ++h) {
        __m256i ah[RB], al[RB];
        for (int r = 0; r < RB; ++r) ah[r] = al[r] = _mm256_setzero_si256();
        if constexpr (kWords) {  // al = the exact total 128 ah + al, ah = 0 (dot_words8)
          for (int b = 0; b < kb; ++b) {
            for (int j = 0; j < 4; ++j) {
              __m256i e01, e23;
              widen_codes8(blk[b] + sh.meta_bytes + u * kTb, h, j, &e01, &e23);
              for (int r = 0; r < RB; ++r)
                dot_words8(e01, e23, words + static_cast<int64_t>(r * ng + k) * kRun + 16 * b + 4 * j, &al[r]);
            }
          }
        } else {  // the run's blocks (probability bytes in [0, 127]: the s16 bound of kS16Units holds)
          dot_tiles<B, RB, kWide, Isa>(
              kb, h, [&](int b) { return blk[b] + sh.meta_bytes + u * kTb; },
              [&](int r, int b) { return static_cast<int64_t>(r * ng + k) * kRun + 16 * b; }, hi, lo, ah, al);
        }
        for (int r = 0; r < RB; ++r) {
          float* o = out + static_cast<int64_t>(r) * d + 16 * u + 8 * h;
          _mm256_storeu_ps(o, _mm256_fmadd_ps(combine<kWide>(ah[r], al[r]), _mm256_set1_ps(step[r * ng + k]),
                                              _mm256_loadu_ps(o)));
        }
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int k = 0; k < ng; ++k) {
      const float* m16 = mt + (r * ng + k) * 16;
      const float m = hsum8(_mm256_add_ps(_mm256_loadu_ps(m16), _mm256_loadu_ps(m16 + 8)));
      float* o = out + static_cast<int64_t>(r) * d + k * g;
      for (int i = 0; i < g; i += 8) _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(o + i), _mm256_set1_ps(m)));
    }
}

#include "kv/codecs/int_tile_loops.inc"

}  // namespace
}  // namespace vlkv::intk
