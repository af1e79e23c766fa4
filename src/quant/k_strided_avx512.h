// The AVX-512 VNNI form of k_strided_x86.h's kernels: 16 weight rows per 512-bit vector (rows r
// and r + 8 in the halves of one vector of products), so the reduction and the f32 steps run
// once per 16 rows. Every lane takes the same operations as the 256-bit kernels, so results
// are bit for bit theirs. Calls of at most 8 rows take the 256-bit kernels.
// Included only inside the VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI) region of
// k_strided_avx512vnni.cpp, after k_strided_x86.h.
#pragma once

#include <immintrin.h>

#include "quant/k_strided_x86.h"

namespace vlkv::quant::kstrided {
namespace {

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 join(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }

// reduce_rows8_halves on vectors v[k] = [row k | row k + 8]: the halves' sums of rows 0..15.
inline void reduce_rows16_halves(const __m512i* v, __m512i& half0, __m512i& half1) {
  __m512i u[4], w[2];
  for (int k = 0; k < 4; ++k)
    u[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  for (int k = 0; k < 2; ++k)
    w[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * k], u[2 * k + 1]), _mm512_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
  // w[0] = [rows 0-3 half 0, half 1, rows 8-11 half 0, half 1], w[1] the same for rows 4-7, 12-15
  const __m512i order = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
  half0 = _mm512_permutexvar_epi32(order, _mm512_shuffle_i32x4(w[0], w[1], 0x88));
  half1 = _mm512_permutexvar_epi32(order, _mm512_shuffle_i32x4(w[0], w[1], 0xDD));
}

inline __m512i products16(__m512i c, __m512i x) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), c, x); }

// Sub-block j's codes of rows p0 (low half) and p1 (high half), as codes<kQ5, j>.
template <bool kQ5, int j>
inline __m512i codes16(const uint8_t* p0, const uint8_t* p1) {
  constexpr int off = (kQ5 ? 48 : 16) + 32 * (j / 2);
  const __m512i v = join(load256(p0 + off), load256(p1 + off));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i c = j % 2 == 0 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  if constexpr (kQ5) {
    const __m512i qh = join(load256(p0 + 16), load256(p1 + 16));
    const __m512i bit = j < 4 ? _mm512_slli_epi16(qh, 4 - j) : _mm512_srli_epi16(qh, j - 4);
    c = _mm512_or_si512(c, _mm512_and_si512(bit, _mm512_set1_epi8(0x10)));
  }
  return c;
}

template <int k>
inline __m512 byte_f32_16(__m512i v) {
  return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF)));
}

struct Heads16 {
  __m512 d, dmin;
  __m512i sc_lo, sc_hi, m_lo, m_hi;
};

inline Heads16 heads16(const uint8_t* const* blk) {
  const Heads a = heads(blk), b = heads(blk + 8);
  return {join(a.d, b.d), join(a.dmin, b.dmin), join(a.sc_lo, b.sc_lo), join(a.sc_hi, b.sc_hi),
          join(a.m_lo, b.m_lo), join(a.m_hi, b.m_hi)};
}

template <bool kQ5, int j>
inline void sub_block16(const uint8_t* const* blk, const Heads16& h, const Q8Activations& x, int64_t xb, __m512& acc) {
  const __m512i xv = _mm512_broadcast_i64x4(load256(x.q.data() + 32 * xb));
  __m512i v[8];
  for (int r = 0; r < 8; ++r) v[r] = products16(codes16<kQ5, j>(blk[r], blk[r + 8]), xv);
  __m512i s0, s1;
  reduce_rows16_halves(v, s0, s1);
  const __m512 s = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
  const float dx = x.d[static_cast<size_t>(xb)];
  const float xsum_d = dx * static_cast<float>(x.half_sum[static_cast<size_t>(2 * xb)] +
                                               x.half_sum[static_cast<size_t>(2 * xb + 1)]);
  const __m512 sc = byte_f32_16<j % 4>(j < 4 ? h.sc_lo : h.sc_hi), m = byte_f32_16<j % 4>(j < 4 ? h.m_lo : h.m_hi);
  const __m512 dw = _mm512_mul_ps(h.d, sc);
  const __m512 dmin_m = _mm512_mul_ps(h.dmin, m);
  acc = _mm512_fmadd_ps(s, _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc);
  acc = _mm512_fnmadd_ps(dmin_m, _mm512_set1_ps(xsum_d), acc);
}

template <bool kQ5, int... J>
inline void super_block16(const uint8_t* const* blk, const Heads16& h, const Q8Activations& x, int64_t b, __m512& acc,
                          std::integer_sequence<int, J...>) {
  (sub_block16<kQ5, J>(blk, h, x, 8 * b + J, acc), ...);
}

template <bool kQ5>
void strided16_k4(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  row_loop<16, kQ5 ? 176 : 144, __m512>(base, stride, n_rows, n, out, [&](const uint8_t* const* blk, int64_t b, __m512& acc) {
    super_block16<kQ5>(blk, heads16(blk), x, b, acc, std::make_integer_sequence<int, 8>());
  });
}

// Q6_K: codes + 32 of block (h, k) of rows p0 (low half) and p1 (high half), as q6_codes<h, k>.
template <int h, int k>
inline __m512i q6_codes16(const uint8_t* p0, const uint8_t* p1) {
  constexpr int lo_off = 64 * h + 32 * (k & 1), hi_off = 128 + 32 * h;
  const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(join(load256(p0 + lo_off), load256(p1 + lo_off)), 4 * (k / 2)),
                                      _mm512_set1_epi8(0x0F));
  const __m512i qh = join(load256(p0 + hi_off), load256(p1 + hi_off));
  const __m512i hi = k < 3 ? _mm512_slli_epi16(qh, 4 - 2 * k) : _mm512_srli_epi16(qh, 2);
  return _mm512_or_si512(lo, _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
}

template <int i>
inline __m512 sbyte_f32_16(__m512i v) {
  return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24));
}

template <int h, int k>
inline void q6_block16(const uint8_t* const* blk, const __m512i* sc, __m512 d, const Q8Activations& x, int64_t xb,
                       __m512& acc) {
  const __m512i xv = _mm512_broadcast_i64x4(load256(x.q.data() + 32 * xb));
  __m512i v[8];
  for (int r = 0; r < 8; ++r) v[r] = products16(q6_codes16<h, k>(blk[r], blk[r + 8]), xv);
  __m512i s0, s1;
  reduce_rows16_halves(v, s0, s1);
  const __m512 dx = _mm512_set1_ps(x.d[static_cast<size_t>(xb)]);
  const __m512i bias0 = _mm512_set1_epi32(32 * x.half_sum[static_cast<size_t>(2 * xb)]);
  const __m512i bias1 = _mm512_set1_epi32(32 * x.half_sum[static_cast<size_t>(2 * xb + 1)]);
  constexpr int g = 8 * h + 2 * k;
  const __m512 dw0 = _mm512_mul_ps(d, sbyte_f32_16<g % 4>(sc[g / 4]));
  const __m512 dw1 = _mm512_mul_ps(d, sbyte_f32_16<g % 4 + 1>(sc[g / 4]));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s0, bias0)), _mm512_mul_ps(dw0, dx), acc);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(s1, bias1)), _mm512_mul_ps(dw1, dx), acc);
}

template <int... B>
inline void q6_super_block16(const uint8_t* const* blk, const __m512i* sc, __m512 d, const Q8Activations& x,
                             int64_t b, __m512& acc, std::integer_sequence<int, B...>) {
  (q6_block16<B / 4, B % 4>(blk, sc, d, x, 8 * b + B, acc), ...);
}

void strided16_q6(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  row_loop<16, 210, __m512>(base, stride, n_rows, n, out, [&](const uint8_t* const* blk, int64_t b, __m512& acc) {
    __m256i lo[4], hi[4];
    transpose_heads(blk, 192, lo);
    transpose_heads(blk + 8, 192, hi);
    const __m512i sc[4] = {join(lo[0], hi[0]), join(lo[1], hi[1]), join(lo[2], hi[2]), join(lo[3], hi[3])};
    alignas(32) uint16_t dh[16];
    for (int r = 0; r < 16; ++r) dh[r] = load_u16(blk[r] + 208);
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dh)));
    q6_super_block16(blk, sc, d, x, b, acc, std::make_integer_sequence<int, 8>());
  });
}

template <KFormat F>
void strided16(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  if (n_rows <= 8) return strided<Madd::kAvx512Vnni, F>(base, stride, n_rows, x, n, out);
  if constexpr (F == KFormat::kQ6_K) strided16_q6(base, stride, n_rows, x, n, out);
  else strided16_k4<F == KFormat::kQ5_K>(base, stride, n_rows, x, n, out);
}

}  // namespace
}  // namespace vlkv::quant::kstrided
