// The 256-bit kernels of q8_0_lanes.h, for AVX-VNNI (kVnni: vpdpbusd on x + 128, the bias
// w . 128 from Q8Lanes' lane 15, as the AVX-512 file) and plain AVX2 (llama.cpp's sign trick:
// vpmaddubsw of |w| with x signed by w, then vpmaddwd by 1; |w| <= 128, |x| <= 127, so a pair sum
// is at most 32512 and never saturates). Either way the block sums are exact, so every tier
// takes the same per-lane f32 steps. Strided: 8 weight rows per vector, 16 rows per pass.
// Lanes: Q8Lanes' 16 lanes as two halves.
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

// Block b's exact sums of 8 weight rows with the activation codes xv, one row per lane.
template <bool kVnni>
inline __m256i block_sums8(const uint8_t* const* rows, int64_t b, __m256i xv) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256i v[8];
  for (int r = 0; r < 8; ++r) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + b * kBytes + 2));
    if constexpr (kVnni)
      v[r] = _mm256_sub_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_xor_si256(xv, bias), wv),
                              _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), bias, wv));
    else
      v[r] = products_avx2(wv, xv);
  }
  return reduce_rows8(v);
}

// Block b's f16 scales of 8 weight rows, as f32.
inline __m256 block_scales8(const uint8_t* const* rows, int64_t b) {
  alignas(16) uint16_t dh[8];
  for (int r = 0; r < 8; ++r) dh[r] = load_u16(rows[r] + b * kBytes);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh)));
}

// out[r] for n_rows <= 8 * G rows at base + r * stride: G groups of 8 rows per pass over the
// blocks, so 8 * G rows' loads are in flight at once (as the AVX-512 kernel's 16 rows).
template <bool kVnni, int G>
void strided_groups(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  const uint8_t* rows[8 * G];
  for (int r = 0; r < 8 * G; ++r) rows[r] = base + (r < n_rows ? r : 0) * stride;
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < 8 * G; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + b * kBytes + kPrefetchBytes), _MM_HINT_T0);
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + b * kQk));
    const __m256 dx = _mm256_set1_ps(x.d[static_cast<size_t>(b)]);
    for (int g = 0; g < G; ++g) {
      const __m256i s = block_sums8<kVnni>(rows + 8 * g, b, xv);
      acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(block_scales8(rows + 8 * g, b), dx), acc[g]);
    }
  }
  alignas(32) float lanes[8 * G];
  for (int g = 0; g < G; ++g) _mm256_store_ps(lanes + 8 * g, acc[g]);
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
  static_assert(kLanes == 16);
  if (n_rows > 8) strided_groups<kVnni, 2>(base, stride, n_rows, x, n, out);
  else strided_groups<kVnni, 1>(base, stride, n_rows, x, n, out);
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
