// Trit order of the ternary codec's blocks and its AVX-512 VNNI accumulate (internal to
// ternary_codec.cpp). Same bytes as a row-major stream (5 trits per byte, ceil(G*d/5)
// bytes); only the order of the trits differs, chosen so that decoding 64 bytes yields
// vpdpbusd operands directly:
//   rows  (head_dim % 16 != 0 or G % 4 != 0): trit i = t * d + c.
//   tiles (otherwise): quad group qg = u * (G/4) + j holds channels 16u..16u+15 x tokens
//         4j..4j+3, element e = 4 l + k (l = channel lane, k = token in the quad): one
//         vector of 16 dword lanes, each lane 4 tokens of one channel. Groups come in
//         chunks of 5 sharing 64 bytes: group 5 ch + g is digit g of byte 64 ch + e
//         (trit i = 320 ch + 5 e + g). The last n_qg % 5 groups follow densely
//         (trit i = 320 n_full + 64 r + e).
// accumulate() then decodes a block's trits once (two vpermi2b + a blend per digit and 64
// bytes) and runs vpdpbusd of the rounded probabilities against the codes in place.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

// GCC 12's AVX-512 headers seed many intrinsics with _mm512_undefined_*(), which trips
// -W(maybe-)uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace vlkv::ternt {

struct TritOrder {
  bool tiled = false;
  int d = 0, G = 0;
  int n_qg = 0, n_full = 0;  // quad groups, full 5-group chunks (tiles only)
};

inline TritOrder trit_order(int d, int G) {
  TritOrder o;
  o.d = d;
  o.G = G;
  o.tiled = d % 16 == 0 && G % 4 == 0;
  if (o.tiled) {
    o.n_qg = (d / 16) * (G / 4);
    o.n_full = o.n_qg / 5;
  }
  return o;
}

// Position of element (t, c) in the block's trit stream.
inline int64_t trit_index(const TritOrder& o, int t, int c) {
  if (!o.tiled) return static_cast<int64_t>(t) * o.d + c;
  const int qg = (c / 16) * (o.G / 4) + t / 4, e = 4 * (c % 16) + t % 4;
  if (qg < 5 * o.n_full) return static_cast<int64_t>(qg / 5) * 320 + 5 * e + qg % 5;
  return static_cast<int64_t>(o.n_full) * 320 + static_cast<int64_t>(qg - 5 * o.n_full) * 64 + e;
}

// pos[i] = t * d + c of trit i (tiles only; one table per shape and thread).
inline const std::vector<int32_t>& trit_positions(const TritOrder& o) {
  thread_local int cached_d = -1, cached_g = -1;
  thread_local std::vector<int32_t> pos;
  if (cached_d != o.d || cached_g != o.G) {
    pos.assign(static_cast<size_t>(o.G) * o.d, 0);
    for (int t = 0; t < o.G; ++t)
      for (int c = 0; c < o.d; ++c) pos[trit_index(o, t, c)] = t * o.d + c;
    cached_d = o.d;
    cached_g = o.G;
  }
  return pos;
}

#define VLKV_TT_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")))

// digit[g][b] = base-3 digit g of byte b minus 1 (the code); bytes >= 243 are never stored.
struct DigitTables {
  alignas(64) int8_t digit[5][256];
  DigitTables() {
    for (int g = 0, p = 1; g < 5; ++g, p *= 3)
      for (int b = 0; b < 256; ++b) digit[g][b] = static_cast<int8_t>(b < 243 ? (b / p) % 3 - 1 : 0);
  }
};
inline const DigitTables& digit_tables() {
  static const DigitTables t;
  return t;
}

// codes[qg][64] (int8 {-1, 0, 1}, element e = 4 l + k) of a tiled block's trits.
// codes needs 64 * n_qg + 8 bytes; code5: [256][8] byte -> its 5 codes (tail).
VLKV_TT_VNNI inline void decode_tiles(const uint8_t* trits, const TritOrder& o, const int8_t (*code5)[8],
                                      int8_t* codes) {
  const auto& T = digit_tables().digit;
  for (int ch = 0; ch < o.n_full; ++ch) {
    const __m512i b = _mm512_loadu_si512(trits + 64 * ch);
    const __mmask64 high = _mm512_movepi8_mask(b);  // bytes >= 128 read the upper half table
    for (int g = 0; g < 5; ++g) {
      const __m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512(T[g]), b, _mm512_load_si512(T[g] + 64));
      const __m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512(T[g] + 128), b, _mm512_load_si512(T[g] + 192));
      _mm512_storeu_si512(codes + 64 * (5 * ch + g), _mm512_mask_blend_epi8(high, lo, hi));
    }
  }
  // Tail: dense trits from a byte boundary (320 trits per chunk = 64 whole bytes).
  const int64_t n_tail = static_cast<int64_t>(o.n_qg - 5 * o.n_full) * 64;
  const uint8_t* tb = trits + 64 * o.n_full;
  int8_t* dst = codes + 320 * o.n_full;
  for (int64_t i = 0; i < (n_tail + 4) / 5; ++i) std::memcpy(dst + 5 * i, code5[tb[i]], 8);
}

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Channels 16 u0 .. 16 (u0 + U) of accum_tiles: 2U independent vpdpbusd chains (one chain
// per unit would wait on the instruction's latency).
template <int U>
VLKV_TT_VNNI inline void accum_units(const int8_t* codes, int nj, int u0, const uint8_t* hb, const uint8_t* lb,
                                     __m512 step, const float* sig, float* out) {
  __m512i ah[U], al[U];
  for (int i = 0; i < U; ++i) ah[i] = al[i] = _mm512_setzero_si512();
  for (int j = 0; j < nj; ++j) {
    const __m512i bh = _mm512_set1_epi32(load_i32(hb + 4 * j)), bl = _mm512_set1_epi32(load_i32(lb + 4 * j));
    for (int i = 0; i < U; ++i) {
      const __m512i v = _mm512_loadu_si512(codes + 64 * (static_cast<int64_t>(u0 + i) * nj + j));
      ah[i] = _mm512_dpbusd_epi32(ah[i], bh, v);
      al[i] = _mm512_dpbusd_epi32(al[i], bl, v);
    }
  }
  for (int i = 0; i < U; ++i) {
    const int c = 16 * (u0 + i);
    const __m512 dot = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ah[i]), _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(al[i]));
    const __m512 w = _mm512_mul_ps(_mm512_loadu_ps(sig + c), step);
    _mm512_storeu_ps(out + c, _mm512_fmadd_ps(dot, w, _mm512_loadu_ps(out + c)));
  }
}

// o[c] += sig[c] * sum_t p[t] * code(t, c) over one tiled block; false (nothing done)
// when some p[t] < 0 (attention passes softmax weights, never negative). p: [G].
// p is rounded to 15 bits (step = max p / 32767, as hi * 128 + lo: two vpdpbusd):
//   |error of o[c]| <= sig[c] * G * step / 2 (+ f32 rounding).
VLKV_TT_VNNI inline bool accum_tiles(const float* p, const int8_t* codes, const TritOrder& o, const float* sig,
                                     float* out) {
  const int G = o.G, nj = G / 4;
  __m512 mx = _mm512_setzero_ps(), mn = mx;
  for (int t = 0; t < G; t += 16) {
    const __mmask16 m = G - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (G - t)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, p + t);
    mx = _mm512_max_ps(mx, x);
    mn = _mm512_min_ps(mn, x);
  }
  // Horizontal max / min by lane shuffles.
  mx = _mm512_max_ps(mx, _mm512_shuffle_f32x4(mx, mx, 0x4e));
  mn = _mm512_min_ps(mn, _mm512_shuffle_f32x4(mn, mn, 0x4e));
  mx = _mm512_max_ps(mx, _mm512_shuffle_f32x4(mx, mx, 0xb1));
  mn = _mm512_min_ps(mn, _mm512_shuffle_f32x4(mn, mn, 0xb1));
  mx = _mm512_max_ps(mx, _mm512_permute_ps(mx, 0x4e));
  mn = _mm512_min_ps(mn, _mm512_permute_ps(mn, 0x4e));
  mx = _mm512_max_ps(mx, _mm512_permute_ps(mx, 0xb1));
  mn = _mm512_min_ps(mn, _mm512_permute_ps(mn, 0xb1));
  const float pmax = _mm512_cvtss_f32(mx);
  if (_mm512_cvtss_f32(mn) < 0.0f) return false;
  if (pmax == 0.0f) return true;     // every p is 0
  if (!(pmax > 0.0f)) return false;  // NaN: the float path propagates it
  alignas(64) uint8_t hb[256], lb[256];  // [G] high and low 7+8 bits of the rounded p
  const __m512 inv = _mm512_set1_ps(32767.0f / pmax);
  for (int t = 0; t < G; t += 16) {
    const __mmask16 m = G - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (G - t)) - 1);
    const __m512i pi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + t), inv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(hb + t), _mm512_cvtepi32_epi8(_mm512_srli_epi32(pi, 7)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lb + t), _mm512_cvtepi32_epi8(_mm512_and_si512(pi, _mm512_set1_epi32(127))));
  }
  const __m512 step = _mm512_set1_ps(pmax / 32767.0f);
  const int nu = o.d / 16;
  int u = 0;
  for (; u + 4 <= nu; u += 4) accum_units<4>(codes, nj, u, hb, lb, step, sig, out);
  for (; u < nu; ++u) accum_units<1>(codes, nj, u, hb, lb, step, sig, out);
  return true;
}

#undef VLKV_TT_VNNI

}  // namespace vlkv::ternt

#pragma GCC diagnostic pop
