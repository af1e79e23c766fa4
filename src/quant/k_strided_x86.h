// The kernels of k_strided.h. Products of a block's codes (unsigned: Q4_K/Q5_K's 0..31, Q6_K's
// code + 32 in 0..63, the 32 x its sum over the group subtracted after) with the activation
// codes: vpdpbusd (AVX-512 VNNI's 256-bit form or AVX-VNNI) or vpmaddubsw + vpmaddwd (AVX2: a
// pair sum is at most 2 * 63 * 128, no saturation); exact either way, so every tier takes the
// same f32 steps.
// Included only inside a VLKV_TARGET_BEGIN region (k_quant_<tier>.cpp): everything here is
// in an unnamed namespace so each file's copy keeps its own target.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "quant/k_strided.h"
#include "quant/quant_internal.h"  // load_u16
#include "quant/reduce_rows_x86.h"

namespace vlkv::quant::kstrided {
namespace {

enum class Madd { kAvx2, kAvxVnni, kAvx512Vnni };

// 8 int32 partial sums of 32 products of unsigned codes c with signed activation codes x.
template <Madd M>
inline __m256i products(__m256i c, __m256i x) {
  if constexpr (M == Madd::kAvx2) return _mm256_madd_epi16(_mm256_maddubs_epi16(c, x), _mm256_set1_epi16(1));
  else if constexpr (M == Madd::kAvxVnni) return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), c, x);
  else return _mm256_dpbusd_epi32(_mm256_setzero_si256(), c, x);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Prefetch distance, in super-blocks: 8 rows' blocks are 8 streams a row apart, each too short
// (a row of 4096 weights: 2.3-3.4 KB) for the hardware prefetchers to ramp up, so decode from
// DRAM waits on each line (quant_dot_bench dram, 1 thread, load ~9: Q6_K 10.7-10.9 GB/s without,
// 13.9-14.8 with; Q4_K 16.2-16.8 without, 18.3-19.3 with; 8 or 16 blocks ahead: no better).
constexpr int kAhead = 4;

template <int64_t kBytes>
inline void prefetch_ahead(const uint8_t* const* blk) {
  for (int r = 0; r < 8; ++r)
    for (int64_t o = 0; o < kBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk[r] + kAhead * kBytes + o), _MM_HINT_T0);
}

// The loop of every kernel: R rows at base + r * stride (past n_rows the lanes repeat row 0),
// super-block by super-block, each prefetched kAhead ahead; step(blk, b, acc) adds super-block
// b's steps to acc (lanes = rows), whose lanes r < n_rows are the results.
template <int R, int64_t kBytes, class Acc, class Step>
inline void row_loop(const uint8_t* base, int64_t stride, int n_rows, int64_t n, float* out, Step step) {
  const uint8_t* blk[R];
  for (int r = 0; r < R; ++r) blk[r] = base + (r < n_rows ? r : 0) * stride;
  Acc acc{};
  for (int64_t b = 0; b < n / 256; ++b) {
    for (int r = 0; r < R; r += 8) prefetch_ahead<kBytes>(blk + r);
    step(blk, b, acc);
    for (auto& p : blk) p += kBytes;
  }
  alignas(64) float lanes[R];
  std::memcpy(lanes, &acc, sizeof(acc));
  for (int r = 0; r < n_rows; ++r) out[r] = lanes[r];
}

// The 16 bytes at offset off of 8 rows' blocks, transposed: out[c] lane r = row r's dword c.
inline void transpose_heads(const uint8_t* const* blk, int off, __m256i* out) {
  __m256i h[4];
  for (int k = 0; k < 4; ++k)  // rows k (low lane) and k + 4 (high lane)
    h[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(blk[k] + off)), load128(blk[k + 4] + off), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(h[0], h[1]), t1 = _mm256_unpackhi_epi32(h[0], h[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(h[2], h[3]), t3 = _mm256_unpackhi_epi32(h[2], h[3]);
  out[0] = _mm256_unpacklo_epi64(t0, t2);  // per 128-bit lane rows 0..3 / 4..7: lanes = rows 0..7
  out[1] = _mm256_unpackhi_epi64(t0, t2);
  out[2] = _mm256_unpacklo_epi64(t1, t3);
  out[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The 8 rows' scales and minima of one super-block, lanes = rows.
struct Heads {
  __m256 d, dmin;             // f16 fields as f32
  __m256i sc_lo, sc_hi;       // byte k of lane r: row r's scale of sub-block k (lo) or 4 + k (hi)
  __m256i m_lo, m_hi;         // the same for the minima
};

// The 8 rows' heads from their d and dmin (f32 lanes) and the 12 scale bytes as dwords A, B, C
// (ggml's get_scale_min_k4: sub-blocks k < 4 take A and B's bytes k, low 6 bits; 4 + k take
// C's byte k's nibbles, the high 2 bits from A's and B's bytes k).
inline Heads unpack_heads(__m256 d, __m256 dmin, __m256i a, __m256i b, __m256i c) {
  Heads r;
  r.d = d;
  r.dmin = dmin;
  const __m256i m6 = _mm256_set1_epi8(0x3F), m4 = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  r.sc_lo = _mm256_and_si256(a, m6);
  r.m_lo = _mm256_and_si256(b, m6);
  r.sc_hi = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_srli_epi32(a, 2), top));
  r.m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 4), m4), _mm256_and_si256(_mm256_srli_epi32(b, 2), top));
  return r;
}

// From bytes 0..15 of each row's block: d | dmin, then the 12 scale bytes.
inline Heads heads(const uint8_t* const* blk) {
  __m256i t[4];
  transpose_heads(blk, 0, t);
  const __m256i dd = t[0];
  // d (low halves) and dmin (high halves) as 8 halves each, then f32
  const __m256i halves = _mm256_permute4x64_epi64(
      _mm256_packus_epi32(_mm256_and_si256(dd, _mm256_set1_epi32(0xFFFF)), _mm256_srli_epi32(dd, 16)), 0xD8);
  return unpack_heads(_mm256_cvtph_ps(_mm256_castsi256_si128(halves)), _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1)),
                      t[1], t[2], t[3]);
}

// Byte k of every dword of v as f32.
template <int k>
inline __m256 byte_f32(__m256i v) {
  if constexpr (k == 0) return _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xFF)));
  else if constexpr (k == 3) return _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 24));
  else return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(v, 8 * k), _mm256_set1_epi32(0xFF)));
}

// Sub-block j's codes of one row's block p (0..15, or 0..31 with Q5_K's bit j of qh).
template <bool kQ5, int j>
inline __m256i codes(const uint8_t* p) {
  const __m256i v = load256(p + (kQ5 ? 48 : 16) + 32 * (j / 2));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i c = j % 2 == 0 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  if constexpr (kQ5) {  // bit j of byte l moved to bit 4 (16-bit shifts: the mask drops what crosses bytes)
    const __m256i qh = load256(p + 16);
    const __m256i bit = j < 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
    c = _mm256_or_si256(c, _mm256_and_si256(bit, _mm256_set1_epi8(0x10)));
  }
  return c;
}

// Activation block xb's two steps for the 8 rows, from their exact sums s over sub-block j.
template <int j>
inline void k4_steps(__m256i s, const Heads& h, const Q8Activations& x, int64_t xb, __m256& acc) {
  const float dx = x.d[static_cast<size_t>(xb)];
  const float xsum_d = x.xsum_d[static_cast<size_t>(xb)];
  const __m256 sc = byte_f32<j % 4>(j < 4 ? h.sc_lo : h.sc_hi), m = byte_f32<j % 4>(j < 4 ? h.m_lo : h.m_hi);
  const __m256 dw = _mm256_mul_ps(h.d, sc);        // exact: 11-bit d times a 6-bit scale
  const __m256 dmin_m = _mm256_mul_ps(h.dmin, m);  // exact, as the reference's dmin * m
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc);
  acc = _mm256_fnmadd_ps(dmin_m, _mm256_set1_ps(xsum_d), acc);  // fma(-(dmin * m), xsum_d, acc)
}

// One sub-block j of the super-block (activation block xb) for the 8 rows.
template <Madd M, bool kQ5, int j>
inline void sub_block(const uint8_t* const* blk, const Heads& h, const Q8Activations& x, int64_t xb, __m256& acc) {
  const __m256i xv = load256(x.q.data() + 32 * xb);
  __m256i v[8];
  for (int r = 0; r < 8; ++r) v[r] = products<M>(codes<kQ5, j>(blk[r]), xv);
  k4_steps<j>(reduce_rows8(v), h, x, xb, acc);
}

template <Madd M, bool kQ5, int... J>
inline void super_block(const uint8_t* const* blk, const Heads& h, const Q8Activations& x, int64_t b, __m256& acc,
                        std::integer_sequence<int, J...>) {
  (sub_block<M, kQ5, J>(blk, h, x, 8 * b + J, acc), ...);
}

// Q4_K / Q5_K: out[r] for n_rows <= 8 rows at base + r * stride (past n_rows the lanes repeat row 0).
template <Madd M, bool kQ5>
void strided8_k4(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  row_loop<8, kQ5 ? 176 : 144, __m256>(base, stride, n_rows, n, out, [&](const uint8_t* const* blk, int64_t b, __m256& acc) {
    super_block<M, kQ5>(blk, heads(blk), x, b, acc, std::make_integer_sequence<int, 8>());
  });
}

// Q6_K (210 bytes: ql[128], qh[64], int8 scales[16], f16 d): code l of 32-block 4h + k is
// ((ql[64h + 32 (k & 1) + l] >> 4 (k / 2)) & 15 | ((qh[32h + l] >> 2k) & 3) << 4) - 32, with
// scale sc[8h + 2k] for l < 16 and sc[8h + 2k + 1] after; here the code + 32.
template <int h, int k>
inline __m256i q6_codes(const uint8_t* p) {
  const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(load256(p + 64 * h + 32 * (k & 1)), 4 * (k / 2)),
                                      _mm256_set1_epi8(0x0F));
  const __m256i qh = load256(p + 128 + 32 * h);  // bits 2k, 2k + 1 to bits 4, 5 (16-bit shifts: the mask
  const __m256i hi = k < 3 ? _mm256_slli_epi16(qh, 4 - 2 * k) : _mm256_srli_epi16(qh, 2);  // drops what crosses bytes)
  return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
}

// Signed byte i of every dword of v as f32.
template <int i>
inline __m256 sbyte_f32(__m256i v) {
  return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * i), 24));
}

// One 32-block (half h, quarter k) of the super-block for the 8 rows: the two groups' steps.
// sc[c]: dword c of the rows' 16 scale bytes (lanes = rows).
template <Madd M, int h, int k>
inline void q6_block(const uint8_t* const* blk, const __m256i* sc, __m256 d, const Q8Activations& x, int64_t xb,
                     __m256& acc) {
  const __m256i xv = load256(x.q.data() + 32 * xb);
  __m256i v[8];
  for (int r = 0; r < 8; ++r) v[r] = products<M>(q6_codes<h, k>(blk[r]), xv);
  __m256i s0, s1;
  reduce_rows8_halves(v, s0, s1);
  const __m256 dx = _mm256_set1_ps(x.d[static_cast<size_t>(xb)]);
  const __m256i bias0 = _mm256_set1_epi32(32 * x.half_sum[static_cast<size_t>(2 * xb)]);
  const __m256i bias1 = _mm256_set1_epi32(32 * x.half_sum[static_cast<size_t>(2 * xb + 1)]);
  constexpr int g = 8 * h + 2 * k;  // scale index of the first group: dword g / 4, byte g % 4
  const __m256 dw0 = _mm256_mul_ps(d, sbyte_f32<g % 4>(sc[g / 4]));  // exact: 11-bit d, 8-bit scale
  const __m256 dw1 = _mm256_mul_ps(d, sbyte_f32<g % 4 + 1>(sc[g / 4]));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s0, bias0)), _mm256_mul_ps(dw0, dx), acc);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s1, bias1)), _mm256_mul_ps(dw1, dx), acc);
}

template <Madd M, int... B>
inline void q6_super_block(const uint8_t* const* blk, const __m256i* sc, __m256 d, const Q8Activations& x, int64_t b,
                           __m256& acc, std::integer_sequence<int, B...>) {
  (q6_block<M, B / 4, B % 4>(blk, sc, d, x, 8 * b + B, acc), ...);
}

template <Madd M>
void strided8_q6(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  row_loop<8, 210, __m256>(base, stride, n_rows, n, out, [&](const uint8_t* const* blk, int64_t b, __m256& acc) {
    __m256i sc[4];
    transpose_heads(blk, 192, sc);
    alignas(16) uint16_t dh[8];
    for (int r = 0; r < 8; ++r) dh[r] = load_u16(blk[r] + 208);
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh)));
    q6_super_block<M>(blk, sc, d, x, b, acc, std::make_integer_sequence<int, 8>());
  });
}

template <Madd M, KFormat F>
void strided(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  for (int r0 = 0; r0 < n_rows; r0 += 8) {
    const int nr = std::min(8, n_rows - r0);
    if constexpr (F == KFormat::kQ6_K) strided8_q6<M>(base + r0 * stride, stride, nr, x, n, out + r0);
    else strided8_k4<M, F == KFormat::kQ5_K>(base + r0 * stride, stride, nr, x, n, out + r0);
  }
}

}  // namespace
}  // namespace vlkv::quant::kstrided
