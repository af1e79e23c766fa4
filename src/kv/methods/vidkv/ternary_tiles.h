// Trit order of the ternary codec's blocks and its SIMD kernels' interface (internal to
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
// The fused ops decode a block's trits once into these int8 codes (AVX-512 VBMI: vpermi2b
// digit tables; AVX2: byte compares) and run integer dots of the rounded probabilities
// (vpdpbusd, or maddubs) and f32 query dots against them in place.
#pragma once

#include <cstdint>
#include <cstring>

#include "kv/codecs/int_tiles.h"  // intt::kMinRoundedMax: the same cut-off for tiny probabilities

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

// digit[g][b] = base-3 digit g of byte b minus 1 (the code); bytes >= 243 are never stored.
struct DigitTables {
  alignas(64) int8_t digit[5][256];
  alignas(64) int8_t code5[256][8];  // [byte][g] = digit[g][byte], g < 5; 0 beyond
  DigitTables() {
    for (int g = 0, p = 1; g < 5; ++g, p *= 3)
      for (int b = 0; b < 256; ++b) digit[g][b] = static_cast<int8_t>(b < 243 ? (b / p) % 3 - 1 : 0);
    for (int b = 0; b < 256; ++b)
      for (int g = 0; g < 8; ++g) code5[b][g] = g < 5 ? digit[g][b] : 0;
  }
};
inline const DigitTables& digit_tables() {
  static const DigitTables t;
  return t;
}

// The tail of a tiled block (the last n_qg % 5 quad groups, dense trits from a byte
// boundary: 320 trits per chunk = 64 whole bytes) into codes, one 8-byte table row per byte.
inline void decode_tail(const uint8_t* trits, const TritOrder& o, int8_t* codes) {
  const auto& code5 = digit_tables().code5;
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

// ---- the ISA kernels (one file each: ternary_tiles_{avx2,avxvnni,avx512}.cpp) ----
// decode: codes[qg][64] (int8 {-1, 0, 1}, element e = 4 l + k) of a tiled block's trits;
//   codes needs 64 * n_qg + 8 bytes.
// accum: o[c] += sig[c] * sum_t p[t] * code(t, c) over one tiled block, p rounded to 15 bits
//   per block (step = max p / 32767, as hi * 128 + lo):
//   |error of o[c]| <= sig[c] * G * step / 2 (+ f32 rounding).
//   false (nothing done) when some p[t] < 0, NaN or inf (attention passes softmax weights);
//   the caller then runs the float path. p: [G], sig, out: [d].
void decode_tiles_avx2(const uint8_t* trits, const TritOrder& o, int8_t* codes);
void decode_tiles_avx512vbmi(const uint8_t* trits, const TritOrder& o, int8_t* codes);
bool accum_tiles_avx2(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out);
bool accum_tiles_avxvnni(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out);
bool accum_tiles_avx512vnni(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out);
// scores: lr[t] = scale * sum_c qs[c] * code(t, c) from decoded tile codes (f32 math, the
//   order of the sums differs from the scalar reference only). qs: [d], lr: [G].
void tile_scores_avx2(const float* qs, const int8_t* codes, const TritOrder& o, float scale, float* lr);
// Row-ordered blocks (ternary_rows_{avx2,avx512}.cpp), codes[t * d + c] unpacked by table:
//   row_scores: lr[t] = scale * dot(qs, codes[t])      qs: [d], codes: [G, d], lr: [G]
//   row_accum:  out[c] += sig[c] * sum_t p[t] * codes[t, c]
void row_scores_avx2(const float* qs, const int8_t* codes, int G, int d, float scale, float* lr);
void row_scores_avx512(const float* qs, const int8_t* codes, int G, int d, float scale, float* lr);
void row_accum_avx2(const float* p, const int8_t* codes, int G, int d, const float* sig, float* out);
void row_accum_avx512(const float* p, const int8_t* codes, int G, int d, const float* sig, float* out);
// ARM64 (ternary_tiles_arm.cpp, ternary_tiles_dotprod.cpp, ternary_rows_arm.cpp): the AVX2
// kernels' codes, sums and float order, so the AVX2 tier's bits.
void decode_tiles_neon(const uint8_t* trits, const TritOrder& o, int8_t* codes);
bool accum_tiles_neon(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out);
bool accum_tiles_dotprod(const float* p, const int8_t* codes, const TritOrder& o, const float* sig, float* out);
void tile_scores_neon(const float* qs, const int8_t* codes, const TritOrder& o, float scale, float* lr);
void row_scores_neon(const float* qs, const int8_t* codes, int G, int d, float scale, float* lr);
void row_accum_neon(const float* p, const int8_t* codes, int G, int d, const float* sig, float* out);

}  // namespace vlkv::ternt

