// The packed-layout (k_packed.h) decode kernels: 8 rows per group, code bytes in 64-byte units
// (8 bytes of each of the 8 rows), one unit per 512-bit vector (U512 in k_packed_avx512.h) or
// two 256-bit halves (U256: rows 0, 1, 4, 5 | 2, 3, 6, 7). Each unit's codes meet the activation
// block's 8 matching bytes broadcast to every row (vpbroadcastq), so a row's int32 lanes pair
// up per unit and one _mm256_hadd_epi32 per activation block (U512: one vpermt2d pair and an
// add per two blocks) gives the 8 rows' exact sums: no per-row horizontal reduction, no
// transposes. The f32 steps are k_strided_x86.h's (k4_steps, the Q6_K group steps) in the same
// order, so results equal dot_q8 bit for bit.
// Included only inside a VLKV_TARGET_BEGIN region (k_quant_<tier>.cpp), after k_strided_x86.h.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/k_strided_x86.h"

namespace vlkv::quant::kstrided {
namespace {

inline __m256i bcast64_256(const int8_t* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm256_set1_epi64x(v);
}

// A 64-byte unit as two 256-bit halves; int32 sums of codes times activations per lane pair.
// Plain AVX2 keeps 16-bit sums (one vpmaddubsw + vpaddw per half, no vpmaddwd per unit) and
// widens them in rows(): exact, as a kernel adds at most 4 units (Q4_K / Q5_K, codes <= 31:
// 4 x 2 x 31 x 127 = 31496) or 2 (Q6_K, codes <= 63: 2 x 2 x 63 x 127 = 32004) per
// accumulator, activation codes |x| <= 127, both under 32767.
template <Madd M>
struct U256 {
  static constexpr bool kWideCodes = M != Madd::kAvx2;  // madd takes codes up to 255 (no int16 pair sums)
  __m256i a, b;
  static U256 load(const uint8_t* p) { return {load256(p), load256(p + 32)}; }
  static U256 zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  U256 operator&(__m256i m) const { return {_mm256_and_si256(a, m), _mm256_and_si256(b, m)}; }
  U256 operator|(const U256& o) const { return {_mm256_or_si256(a, o.a), _mm256_or_si256(b, o.b)}; }
  template <int s>
  U256 shift16() const {  // 16-bit lanes shifted left by s (right by -s)
    if constexpr (s >= 0) return {_mm256_slli_epi16(a, s), _mm256_slli_epi16(b, s)};
    else return {_mm256_srli_epi16(a, -s), _mm256_srli_epi16(b, -s)};
  }
  static __m256i madd1(__m256i acc, __m256i c, __m256i x) {
    if constexpr (M == Madd::kAvx2) return _mm256_add_epi16(acc, _mm256_maddubs_epi16(c, x));
    else if constexpr (M == Madd::kAvxVnni) return _mm256_dpbusd_avx_epi32(acc, c, x);
    else return _mm256_dpbusd_epi32(acc, c, x);
  }
  // acc += codes (unsigned) times the 8 activation codes at x, per row.
  void madd(const U256& c, const int8_t* x) {
    const __m256i xv = bcast64_256(x);
    a = madd1(a, c.a, xv);
    b = madd1(b, c.b, xv);
  }
  __m256i rows() const {  // the 8 rows' sums, in order
    if constexpr (M == Madd::kAvx2) {
      const __m256i one = _mm256_set1_epi16(1);
      return _mm256_hadd_epi32(_mm256_madd_epi16(a, one), _mm256_madd_epi16(b, one));
    } else {
      return _mm256_hadd_epi32(a, b);
    }
  }
  static void rows2(const U256& lo, const U256& hi, __m256i& rlo, __m256i& rhi) {
    rlo = lo.rows();
    rhi = hi.rows();
  }
};


// Prefetch distance of the packed kernels, in packed super-blocks (one stream per 8 rows).
constexpr int kPackedAhead = 2;

template <int64_t kBytes>
inline void prefetch_packed(const uint8_t* p) {
  for (int64_t o = 0; o < kBytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kPackedAhead * kBytes + o), _MM_HINT_T0);
}

// Q4_K / Q5_K's 8-row heads from the packed d[8], dmin[8], scale dwords A[8], B[8], C[8].
inline Heads packed_heads(const uint8_t* p) {
  return unpack_heads(_mm256_cvtph_ps(load128(p)), _mm256_cvtph_ps(load128(p + 16)), load256(p + 32), load256(p + 64),
                      load256(p + 96));
}

// Bit j of every byte moved to bit 4 (16-bit shifts: the mask drops what crosses bytes).
template <int j, class U>
inline U fifth_bit(const U& qh) {
  return qh.template shift16<4 - j>() & _mm256_set1_epi8(0x10);
}

// Chunk c of a Q4_K / Q5_K packed super-block p (sub-blocks 2c: low nibbles, 2c + 1: high) for
// activation blocks xb = 8b + 2c and xb + 1.
template <class U, bool kQ5, int c>
inline void packed_k4_chunk(const uint8_t* p, const Heads& h, const Q8Activations& x, int64_t b, __m256& acc) {
  const uint8_t* qs = p + (kQ5 ? 384 : 128) + 256 * c;
  const int64_t xb = 8 * b + 2 * c;
  const int8_t* x0 = x.q.data() + 32 * xb;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  // Q4_K's high nibbles are taken in place (16 x the code) where madd allows codes up to 255:
  // the sum is then exactly 16 x the codes' sum, shifted back once per sub-block.
  constexpr bool kHi16 = !kQ5 && U::kWideCodes;
  U lo = U::zero(), hi = U::zero();
  for (int u = 0; u < 4; ++u) {
    const U v = U::load(qs + 64 * u);
    U cl = v & m4, ch = kHi16 ? v & _mm256_set1_epi8(static_cast<char>(0xF0)) : v.template shift16<-4>() & m4;
    if constexpr (kQ5) {
      const U qh = U::load(p + 128 + 64 * u);
      cl = cl | fifth_bit<2 * c>(qh);
      ch = ch | fifth_bit<2 * c + 1>(qh);
    }
    lo.madd(cl, x0 + 8 * u);
    hi.madd(ch, x0 + 32 + 8 * u);
  }
  __m256i lo_rows, hi_rows;
  U::rows2(lo, hi, lo_rows, hi_rows);
  k4_steps<2 * c>(lo_rows, h, x, xb, acc);
  k4_steps<2 * c + 1>(kHi16 ? _mm256_srai_epi32(hi_rows, 4) : hi_rows, h, x, xb + 1, acc);
}

template <class U, bool kQ5>
void packed8_k4(const uint8_t* group, const Q8Activations& x, int64_t n, float* out) {
  constexpr int64_t kBytes = kQ5 ? 8 * 176 : 8 * 144;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = group + b * kBytes;
    prefetch_packed<kBytes>(p);
    const Heads h = packed_heads(p);
    packed_k4_chunk<U, kQ5, 0>(p, h, x, b, acc);
    packed_k4_chunk<U, kQ5, 1>(p, h, x, b, acc);
    packed_k4_chunk<U, kQ5, 2>(p, h, x, b, acc);
    packed_k4_chunk<U, kQ5, 3>(p, h, x, b, acc);
  }
  _mm256_storeu_ps(out, acc);
}

// The 8 rows' int8 scales of one group as f32.
inline __m256 packed_scales(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// One 32-block (half hf, quarter k) of a Q6_K packed super-block p (ql units at 0, qh units at
// 1024, int8 scales [16][8] at 1536): codes + 32 against activation block xb, then the two
// 16-weight groups' steps as q6_block's.
template <class U, int hf, int k>
inline void packed_q6_block(const uint8_t* p, __m256 d, const Q8Activations& x, int64_t xb, __m256& acc) {
  const int8_t* x0 = x.q.data() + 32 * xb;
  U s[2] = {U::zero(), U::zero()};
  for (int u = 0; u < 4; ++u) {
    const U ql = U::load(p + 64 * (8 * hf + 4 * (k & 1) + u));
    const U qh = U::load(p + 1024 + 64 * (4 * hf + u));
    const U lo = ql.template shift16<-4 * (k / 2)>() & _mm256_set1_epi8(0x0F);
    const U hi = qh.template shift16<4 - 2 * k>() & _mm256_set1_epi8(0x30);  // bits 2k, 2k + 1 to bits 4, 5
    s[u / 2].madd(lo | hi, x0 + 8 * u);
  }
  const __m256 dx = _mm256_set1_ps(x.d[static_cast<size_t>(xb)]);
  const __m256i bias0 = _mm256_set1_epi32(32 * x.half_sum[static_cast<size_t>(2 * xb)]);
  const __m256i bias1 = _mm256_set1_epi32(32 * x.half_sum[static_cast<size_t>(2 * xb + 1)]);
  constexpr int g = 8 * hf + 2 * k;
  const __m256 dw0 = _mm256_mul_ps(d, packed_scales(p + 1536 + 8 * g));  // exact: 11-bit d, 8-bit scale
  const __m256 dw1 = _mm256_mul_ps(d, packed_scales(p + 1536 + 8 * (g + 1)));
  __m256i r0, r1;
  U::rows2(s[0], s[1], r0, r1);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(r0, bias0)), _mm256_mul_ps(dw0, dx), acc);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(r1, bias1)), _mm256_mul_ps(dw1, dx), acc);
}

template <class U, int... B>
inline void packed_q6_super_block(const uint8_t* p, __m256 d, const Q8Activations& x, int64_t b, __m256& acc,
                                  std::integer_sequence<int, B...>) {
  (packed_q6_block<U, B / 4, B % 4>(p, d, x, 8 * b + B, acc), ...);
}

template <class U>
void packed8_q6(const uint8_t* group, const Q8Activations& x, int64_t n, float* out) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = group + b * (8 * 210);
    prefetch_packed<8 * 210>(p);
    const __m256 d = _mm256_cvtph_ps(load128(p + 1664));
    packed_q6_super_block<U>(p, d, x, b, acc, std::make_integer_sequence<int, 8>());
  }
  _mm256_storeu_ps(out, acc);
}

template <class U, KFormat F>
void packed8(const void* group, const Q8Activations& x, int64_t n, float* out) {
  const auto* g = static_cast<const uint8_t*>(group);
  if constexpr (F == KFormat::kQ6_K) packed8_q6<U>(g, x, n, out);
  else packed8_k4<U, F == KFormat::kQ5_K>(g, x, n, out);
}

}  // namespace
}  // namespace vlkv::quant::kstrided
