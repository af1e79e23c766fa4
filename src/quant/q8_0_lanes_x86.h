// The 256-bit kernels of q8_0_lanes.h, for AVX-VNNI (kVnni: vpdpbusd on x + 128, the bias
// w . 128 from Q8Lanes' lane 15, as the AVX-512 file) and plain AVX2 (llama.cpp's sign trick:
// vpmaddubsw of |w| with x signed by w, then vpmaddwd by 1; |w| <= 128, |x| <= 127, so a pair sum
// is at most 32512 and never saturates). Either way the block sums are exact, so every tier
// takes the same per-lane f32 steps. Strided: 8 weight rows per vector. Lanes: Q8Lanes' 16
// lanes as two halves.
// Included only inside a VLKV_TARGET_BEGIN region (q8_0_lanes_avx2.cpp, q8_0_lanes_avx2vnni.cpp):
// everything here is in an unnamed namespace so each file's copy keeps its own target.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "quant/q8_0_lanes.h"
#include "quant/reduce_rows_x86.h"

namespace vlkv::quant::q8lanes {
namespace {

// Products of 32 weight codes w with 32 activation codes x, summed per 4 bytes: 8 exact int32.
inline __m256i products_avx2(__m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// out[r] for n_rows <= 8 rows at base + r * stride.
template <bool kVnni>
void strided8(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  const uint8_t* rows[8];
  for (int r = 0; r < 8; ++r) rows[r] = base + (r < n_rows ? r : 0) * stride;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + b * kQk));
    __m256i v[8];
    for (int r = 0; r < 8; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + b * kBytes + 2));
      if constexpr (kVnni)
        v[r] = _mm256_sub_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_xor_si256(xv, bias), wv),
                                _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), bias, wv));
      else
        v[r] = products_avx2(wv, xv);
    }
    const __m256i s = reduce_rows8(v);
    alignas(16) uint16_t dh[8];  // the 8 rows' f16 block scales
    for (int r = 0; r < 8; ++r) dh[r] = load_u16(rows[r] + b * kBytes);
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(x.d[static_cast<size_t>(b)])), acc);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (int r = 0; r < n_rows; ++r) out[r] = lanes[r];
}

// 8 lanes (half h of Q8Lanes) of one block of one weight row: the exact sums (VNNI: of x + 128,
// the bias not yet removed; AVX2: of x, the lanes' codes un-biased first).
template <bool kVnni>
inline __m256i half_sums(const uint32_t* xb, int h, const uint8_t* wb) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;  // two chains: the multiply-adds' latency
  for (int k = 0; k < 8; ++k) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + k * kLanes + 8 * h));
    const __m256i wv = _mm256_set1_epi32(static_cast<int32_t>(load_u32(wb + 2 + 4 * k)));
    __m256i& s = k % 2 ? s1 : s0;
    if constexpr (kVnni)
      s = _mm256_dpbusd_avx_epi32(s, xv, wv);
    else
      s = _mm256_add_epi32(s, products_avx2(wv, _mm256_xor_si256(xv, _mm256_set1_epi8(static_cast<char>(0x80)))));
  }
  return _mm256_add_epi32(s0, s1);
}

// R (<= 4: two accumulators each in 16 registers) weight rows against the 16 lanes.
template <bool kVnni, int R>
void lanes_r(const void* const* rows, const Q8Lanes& x, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  const __m256i k7 = _mm256_set1_epi32(7);
  __m256 lo[R], hi[R];
  for (int i = 0; i < R; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint32_t* xb = x.codes.data() + b * 8 * kLanes;
    const __m256 dx_lo = _mm256_loadu_ps(x.d.data() + b * kLanes), dx_hi = _mm256_loadu_ps(x.d.data() + b * kLanes + 8);
    for (int i = 0; i < R; ++i) {
      const uint8_t* wb = static_cast<const uint8_t*>(rows[i]) + b * kBytes;
      __m256i sh = half_sums<kVnni>(xb, 1, wb), sl = half_sums<kVnni>(xb, 0, wb);
      if constexpr (kVnni) {
        const __m256i bias = _mm256_permutevar8x32_epi32(sh, k7);  // lane 15: w . 128
        sh = _mm256_sub_epi32(sh, bias);
        sl = _mm256_sub_epi32(sl, bias);
      }
      const __m256 dw = _mm256_set1_ps(_cvtsh_ss(load_u16(wb)));
      lo[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sl), _mm256_mul_ps(dw, dx_lo), lo[i]);
      hi[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sh), _mm256_mul_ps(dw, dx_hi), hi[i]);
    }
  }
  for (int i = 0; i < R; ++i) {
    _mm256_storeu_ps(out + i * kLanes, lo[i]);
    _mm256_storeu_ps(out + i * kLanes + 8, hi[i]);
  }
}

template <bool kVnni>
void strided_256(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  for (int r0 = 0; r0 < n_rows; r0 += 8)
    strided8<kVnni>(base + r0 * stride, stride, std::min(8, n_rows - r0), x, n, out + r0);
}

template <bool kVnni>
void lanes_256(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  for (int i0 = 0; i0 < n_rows; i0 += 4) {
    const void* const* r = rows + i0;
    float* o = out + i0 * kLanes;
    switch (std::min(4, n_rows - i0)) {
      case 4: lanes_r<kVnni, 4>(r, x, n, o); break;
      case 3: lanes_r<kVnni, 3>(r, x, n, o); break;
      case 2: lanes_r<kVnni, 2>(r, x, n, o); break;
      default: lanes_r<kVnni, 1>(r, x, n, o);
    }
  }
}

}  // namespace
}  // namespace vlkv::quant::q8lanes
