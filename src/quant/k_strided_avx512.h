// The AVX-512 VNNI form of k_strided_x86.h's Q4_K / Q5_K kernel: 8 weight rows, two sub-blocks
// per 512-bit vector of products, so a load, mask, vpdpbusd and the reduction serve two
// sub-blocks. Exact integer sums and the 256-bit kernels' f32 steps (k4_steps), so results are
// bit for bit theirs.
// Included only inside the VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI) region of
// k_quant_avx512vnni.cpp, after k_strided_x86.h.
#pragma once

#include <immintrin.h>

#include "quant/k_strided_x86.h"

namespace vlkv::quant::kstrided {
namespace {

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// reduce_rows8_halves on vectors v[k] = [part a of row k | part b of row k] (256 bits each): the
// sums of the parts' 128-bit halves, [a of rows 0..7 | b of rows 0..7].
inline void reduce_rows8_pairs_halves(const __m512i* v, __m512i& half0, __m512i& half1) {
  __m512i u[4], w[2];
  for (int k = 0; k < 4; ++k)
    u[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  for (int k = 0; k < 2; ++k)
    w[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * k], u[2 * k + 1]), _mm512_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
  // w[0] = [a: rows 0-3 half 0, half 1; b: rows 0-3 half 0, half 1], w[1] the same for rows 4-7
  const __m512i order = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
  half0 = _mm512_permutexvar_epi32(order, _mm512_shuffle_i32x4(w[0], w[1], 0x88));
  half1 = _mm512_permutexvar_epi32(order, _mm512_shuffle_i32x4(w[0], w[1], 0xDD));
}

inline __m512i products512(__m512i c, __m512i x) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), c, x); }

// Q4_K / Q5_K on 8 rows, two sub-blocks per 512-bit vector: a row's 64 code bytes of chunk c
// hold sub-blocks 4c (low nibbles of the low 32 bytes), 4c + 1 (their high nibbles), 4c + 2 and
// 4c + 3 (the same of the high 32 bytes). (16 rows per vector, one sub-block each, was faster
// from cache but read 16 row streams at once: quant_dot_bench dram 15.6-16.8 GB/s against the
// 256-bit kernel's 17.4-20.2, and slower end to end; this form: dram 17.9-18.5, hot 33-38
// against 24-27.)
template <bool kQ5, int c, int t>
inline __m512i codes_pair(const uint8_t* p) {  // sub-blocks 4c + t | 4c + 2 + t
  const __m512i v = _mm512_loadu_si512(p + (kQ5 ? 48 : 16) + 64 * c);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i q = t == 0 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  if constexpr (kQ5) {  // bit j of qh[l] to bit 4, j = 4c + t in the low half, 4c + 2 + t in the high
    const __m512i qh = _mm512_broadcast_i64x4(load256(p + 16));
    const __m512i shift = join(_mm256_set1_epi16(4 * c + t), _mm256_set1_epi16(4 * c + 2 + t));
    const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(qh, shift), _mm512_set1_epi8(0x01));
    q = _mm512_or_si512(q, _mm512_slli_epi16(bit, 4));
  }
  return q;
}

template <bool kQ5, int c, int t>
inline __m512i pair_sums(const uint8_t* const* blk, __m512i xv) {
  __m512i v[8];
  for (int r = 0; r < 8; ++r) v[r] = products512(codes_pair<kQ5, c, t>(blk[r]), xv);
  __m512i s0, s1;
  reduce_rows8_pairs_halves(v, s0, s1);
  return _mm512_add_epi32(s0, s1);  // [sub-block 4c + t | 4c + 2 + t], lanes = rows
}

template <bool kQ5, int c>
inline void chunk(const uint8_t* const* blk, const Heads& h, const Q8Activations& x, int64_t b, __m256& acc) {
  const int64_t xb = 8 * b + 4 * c;
  const int8_t* xq = x.q.data() + 32 * xb;
  const __m512i s_even = pair_sums<kQ5, c, 0>(blk, join(load256(xq), load256(xq + 64)));
  const __m512i s_odd = pair_sums<kQ5, c, 1>(blk, join(load256(xq + 32), load256(xq + 96)));
  k4_steps<4 * c>(_mm512_castsi512_si256(s_even), h, x, xb, acc);  // blocks in order
  k4_steps<4 * c + 1>(_mm512_castsi512_si256(s_odd), h, x, xb + 1, acc);
  k4_steps<4 * c + 2>(_mm512_extracti64x4_epi64(s_even, 1), h, x, xb + 2, acc);
  k4_steps<4 * c + 3>(_mm512_extracti64x4_epi64(s_odd, 1), h, x, xb + 3, acc);
}

template <bool kQ5>
void strided8_k4_512(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  row_loop<8, kQ5 ? 176 : 144, __m256>(base, stride, n_rows, n, out, [&](const uint8_t* const* blk, int64_t b, __m256& acc) {
    const Heads h = heads(blk);
    chunk<kQ5, 0>(blk, h, x, b, acc);
    chunk<kQ5, 1>(blk, h, x, b, acc);
  });
}

// Q6_K keeps the 256-bit kernel (its 16-row 512-bit form was slower end to end, as Q4_K's).
template <KFormat F>
void strided_512(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  if constexpr (F == KFormat::kQ6_K) {
    strided<Madd::kAvx512Vnni, F>(base, stride, n_rows, x, n, out);
  } else {
    for (int r0 = 0; r0 < n_rows; r0 += 8)
      strided8_k4_512<F == KFormat::kQ5_K>(base + r0 * stride, stride, std::min(8, n_rows - r0), x, n, out + r0);
  }
}

}  // namespace
}  // namespace vlkv::quant::kstrided
