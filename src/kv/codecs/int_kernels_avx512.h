// AVX-512 VNNI scores() for the integer codecs, on the codes in place (no dequantized
// tile): 16 tokens per pass, one token per 32-bit lane, vpdpbusd of u8 codes x s8 query.
//
// The query row is quantized once per call (per-token keys) or once per G-token block
// (per-channel keys, where q'_c = q_c * scale_c is folded first) to 16 bits per channel,
// with one f32 step per 16-channel unit: qi = round(q / step), |qi| <= 32512, split
// qi = 256 * hi + lo with hi, lo in s8, so q.code = step * (256 * (hi.code) + lo.code)
// with two vpdpbusd and exact int32 sums. Per-token keys (k = code * s_g + m_g per
// group of g channels): q.k = sum_g s_g * (q_g.code_g) + m_g * sum(q_g); per-channel
// keys (k_c = code_c * s_c + m_c over the block): q.k = q'.code + sum_c q_c m_c.
// Deviation from exact arithmetic on the stored values: per unit at most step/2 per
// channel times the codes (step = max|q_unit| / 32512), plus f32 rounding.
// Packed layouts (int_pack.h) for B = 2, 4, 8; a unit of 16 codes is 4 / 8 / 16 bytes,
// read with dword gathers (tokens at a fixed byte stride).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/simd_dispatch.h"
#include "kv/codecs/int_tiles.h"

// GCC 12's AVX-512 headers seed many intrinsics with _mm512_undefined_*(), which trips
// -Wmaybe-uninitialized once inlined here; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace vlkv::intk {

#define VLKV_VNNI VLKV_TARGET(VLKV_ISA_AVX512_VNNI)

constexpr int kQMax = 127 * 65536;  // 24-bit query: qi = 65536 hi + 256 mid + lo, each in s8

// One prepared query row: per unit u of 16 channels, hi/lo bytes and the step.
struct PrepRow {
  int8_t* hi;    // [d]
  int8_t* lo;    // [d]
  int8_t* mid;   // [d]
  float* step;   // [d / 16]
};

// q: [d] f32 (times mul[d] when mul != null) -> prepared row. d % 16 == 0.
// Returns sum_c q_c * add[c] when add != null (else 0).
VLKV_VNNI inline float prep_row(const float* q, const float* mul, const float* add, int d, PrepRow r) {
  __m512 cacc = _mm512_setzero_ps();
  for (int u = 0; u < d / 16; ++u) {
    const __m512 qv = _mm512_loadu_ps(q + 16 * u);
    if (add) cacc = _mm512_fmadd_ps(qv, _mm512_loadu_ps(add + 16 * u), cacc);
    const __m512 v = mul ? _mm512_mul_ps(qv, _mm512_loadu_ps(mul + 16 * u)) : qv;
    const float mx = _mm512_reduce_max_ps(_mm512_abs_ps(v));
    const float step = mx > 0.0f ? mx / static_cast<float>(kQMax) : 0.0f;
    const float inv = intt::inverse_step(static_cast<float>(kQMax), mx);
    r.step[u] = step;
    __m512i qi = _mm512_maskz_cvtps_epi32(0xffff, _mm512_mul_ps(v, _mm512_set1_ps(inv)));  // round to nearest
    qi = _mm512_max_epi32(_mm512_min_epi32(qi, _mm512_set1_epi32(kQMax)), _mm512_set1_epi32(-kQMax));
    const __m512i k128 = _mm512_set1_epi32(128), k255 = _mm512_set1_epi32(255);
    const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(qi, k128), k255), k128);
    const __m512i r1 = _mm512_srai_epi32(_mm512_sub_epi32(qi, lo), 8);
    const __m512i mid = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(r1, k128), k255), k128);
    const __m512i hi = _mm512_srai_epi32(_mm512_sub_epi32(r1, mid), 8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r.mid + 16 * u), _mm512_maskz_cvtepi32_epi8(0xffff, mid));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r.hi + 16 * u), _mm512_maskz_cvtepi32_epi8(0xffff, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r.lo + 16 * u), _mm512_maskz_cvtepi32_epi8(0xffff, lo));
  }
  return add ? _mm512_reduce_add_ps(cacc) : 0.0f;
}

// Unit u of 16 tokens (lane t: bytes at base + idx[t]) -> quads[i]: byte j of lane t =
// code of channel 16u + 4i + j.
template <int B>
VLKV_VNNI inline void load_unit(const uint8_t* base, __m512i idx, __mmask16 m, int u, __m512i* quads) {
  const __m512i z = _mm512_setzero_si512();
  if constexpr (B == 2) {
    const __m512i w = _mm512_mask_i32gather_epi32(z, m, idx, base + 4 * u, 1);
    const __m512i k3 = _mm512_set1_epi8(3);
    quads[0] = _mm512_and_si512(w, k3);
    quads[1] = _mm512_and_si512(_mm512_srli_epi32(w, 2), k3);
    quads[2] = _mm512_and_si512(_mm512_srli_epi32(w, 4), k3);
    quads[3] = _mm512_and_si512(_mm512_srli_epi32(w, 6), k3);
  } else if constexpr (B == 4) {
    const __m512i w0 = _mm512_mask_i32gather_epi32(z, m, idx, base + 8 * u, 1);
    const __m512i w1 = _mm512_mask_i32gather_epi32(z, m, idx, base + 8 * u + 4, 1);
    const __m512i kf = _mm512_set1_epi8(15);
    quads[0] = _mm512_and_si512(w0, kf);
    quads[1] = _mm512_and_si512(w1, kf);
    quads[2] = _mm512_and_si512(_mm512_srli_epi32(w0, 4), kf);
    quads[3] = _mm512_and_si512(_mm512_srli_epi32(w1, 4), kf);
  } else {
    for (int i = 0; i < 4; ++i) quads[i] = _mm512_mask_i32gather_epi32(z, m, idx, base + 16 * u + 4 * i, 1);
  }
}

// For RB prepared rows and 16 tokens: acc[r] (f32 per token) += sum over units
// [u0, u1) of step_u * (q_u . codes_u).
template <int B, int RB>
VLKV_VNNI inline void dot_units(const uint8_t* base, __m512i idx, __mmask16 m, int u0, int u1, const PrepRow* rows,
                                __m512* acc) {
  for (int u = u0; u < u1; ++u) {
    __m512i quads[4];
    load_unit<B>(base, idx, m, u, quads);
    for (int r = 0; r < RB; ++r) {
      const int32_t* hi = reinterpret_cast<const int32_t*>(rows[r].hi + 16 * u);
      const int32_t* lo = reinterpret_cast<const int32_t*>(rows[r].lo + 16 * u);
      const int32_t* mi = reinterpret_cast<const int32_t*>(rows[r].mid + 16 * u);
      __m512i ah = _mm512_setzero_si512(), am = ah, al = ah;
      for (int i = 0; i < 4; ++i) {
        int32_t h, mm, l;
        std::memcpy(&h, hi + i, 4);
        std::memcpy(&mm, mi + i, 4);
        std::memcpy(&l, lo + i, 4);
        ah = _mm512_dpbusd_epi32(ah, quads[i], _mm512_set1_epi32(h));
        am = _mm512_dpbusd_epi32(am, quads[i], _mm512_set1_epi32(mm));
        al = _mm512_dpbusd_epi32(al, quads[i], _mm512_set1_epi32(l));
      }
      // hi and mid+lo parts: each exact in f32 (|sums| < 2^24), one rounding when added.
      const __m512 fh = _mm512_maskz_cvtepi32_ps(0xffff, ah);
      const __m512 fl = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_add_epi32(_mm512_slli_epi32(am, 8), al));
      const __m512 st = _mm512_set1_ps(rows[r].step[u]);
      acc[r] = _mm512_fmadd_ps(_mm512_fmadd_ps(fh, _mm512_set1_ps(65536.0f), fl), st, acc[r]);
    }
  }
}

// 16 f16 values gathered at base + idx (halves at even or odd position of a dword).
VLKV_VNNI inline __m512 gather_half(const uint8_t* base, __m512i idx, __mmask16 m) {
  // Read the dword starting at the half; its low 16 bits are the half.
  const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 1);
  return _mm512_maskz_cvtph_ps(0xffff, _mm512_maskz_cvtepi32_epi16(0xffff, w));
}

}  // namespace vlkv::intk
