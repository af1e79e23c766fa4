// The 256-bit kernel of q8_0_gemm.h, for AVX-VNNI (kVnni: vpdpbusd on x + 128, started at
// -bias) and plain AVX2 (the codes un-biased, then llama.cpp's sign trick: vpmaddubsw of |w|
// with x signed by w, vpmaddwd by 1; a pair sum is at most 2 * 128 * 127 and never saturates).
// With codes in [0, 63] (kU63) AVX2 multiplies them directly as vpmaddubsw's unsigned operand
// with the signed codes (a pair sum is at most 2 * 63 * 128). A panel's 16 lanes as two halves;
// 4 weight rows per pass. Block sums are exact either way.
// Split blocks and offsets as in q8_0_gemm_avx512vnni.cpp.
// Included only inside a VLKV_TARGET_BEGIN region (q8_0_gemm_avx2.cpp, q8_0_gemm_avx2vnni.cpp):
// everything here is in an unnamed namespace so each file's copy keeps its own target.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "quant/q8_0_gemm.h"
#include "quant/q8_0_lanes.h"

namespace vlkv::quant {
namespace {

// The block terms with 256-bit integer sums: vpsadbw of the codes + 128 (as u8) against
// zero gives sum(w) + 32 * 128 in four 64-bit lanes. Also the AVX-512 file's (the work is
// per weight block, not per panel, so the width does not matter).
void block_terms_256(const uint8_t* blocks, int64_t row_bytes, int n_rows, int64_t n_blocks, int32_t* bias,
                     float* dw, int64_t ld) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int i = 0; i < n_rows; ++i)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* blk = blocks + i * row_bytes + b * q8lanes::kBytes;
      const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), flip);
      const __m256i s4 = _mm256_sad_epu8(v, _mm256_setzero_si256());
      __m128i s = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
      s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
      bias[i * ld + b] = 128 * (_mm_cvtsi128_si32(s) - 32 * 128);
      dw[i * ld + b] = _cvtsh_ss(load_u16(blk));
    }
}

template <bool kVnni, int R, bool kSplit, bool kOffset, bool kU63 = false>
void tile_256_r(const GemmWeightRows& w, const uint8_t* wbase, const GemmPanel& x, int64_t n_blocks, float* acc,
                int i0) {
  constexpr int kGroups = kSplit ? 2 : 1;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 a[R][2];
  for (int i = 0; i < R; ++i)
    for (int h = 0; h < 2; ++h) a[i][h] = _mm256_loadu_ps(acc + i * kGemmPanelRows + 8 * h);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint32_t* xb = x.codes + b * 8 * kGemmPanelRows;
    __m256i xs[kU63 ? 8 : 1][2];  // kU63: the block's signed codes, shared by the R rows
    if constexpr (kU63)
      for (int k = 0; k < 8; ++k)
        for (int h = 0; h < 2; ++h)
          xs[k][h] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + k * kGemmPanelRows + 8 * h)), flip);
    const __m256 dx0 = _mm256_loadu_ps(x.d + b * kGemmPanelRows), dx1 = _mm256_loadu_ps(x.d + b * kGemmPanelRows + 8);
    for (int i = 0; i < R; ++i) {
      const uint8_t* wb = wbase + i * w.row_bytes + b * w.block_stride;
      for (int g = 0; g < kGroups; ++g) {
        __m256i s0, s1;
        if constexpr (kVnni) {
          s0 = s1 = _mm256_set1_epi32(-w.bias[(i0 + i) * w.ld + b * kGroups + g]);
        } else {
          s0 = s1 = _mm256_setzero_si256();
        }
        if constexpr (kU63) {  // two dwords' vpmaddubsw summed in 16 bits: 2 * 2 * 63 * 128 < 32767
          static_assert(!kVnni && !kSplit);
          for (int k = 0; k < 8; k += 2) {
            const __m256i w0 = _mm256_set1_epi32(static_cast<int32_t>(load_u32(wb + 4 * k)));
            const __m256i w1 = _mm256_set1_epi32(static_cast<int32_t>(load_u32(wb + 4 * k + 4)));
            const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(w0, xs[k][0]), _mm256_maddubs_epi16(w1, xs[k + 1][0]));
            const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(w0, xs[k][1]), _mm256_maddubs_epi16(w1, xs[k + 1][1]));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, ones));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, ones));
          }
        } else {
          for (int k = g * 8 / kGroups; k < (g + 1) * 8 / kGroups; ++k) {
            const __m256i wv = _mm256_set1_epi32(static_cast<int32_t>(load_u32(wb + 4 * k)));
            const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + k * kGemmPanelRows));
            const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + k * kGemmPanelRows + 8));
            if constexpr (kVnni) {
              s0 = _mm256_dpbusd_avx_epi32(s0, x0, wv);
              s1 = _mm256_dpbusd_avx_epi32(s1, x1, wv);
            } else {
              const __m256i aw = _mm256_sign_epi8(wv, wv);
              s0 = _mm256_add_epi32(
                  s0, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_xor_si256(x0, flip), wv)), ones));
              s1 = _mm256_add_epi32(
                  s1, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_xor_si256(x1, flip), wv)), ones));
            }
          }
        }
        const __m256 dw = _mm256_set1_ps(w.dw[(i0 + i) * w.ld + b * kGroups + g]);
        a[i][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_mul_ps(dw, dx0), a[i][0]);
        a[i][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_mul_ps(dw, dx1), a[i][1]);
      }
      if constexpr (kOffset) {
        const __m256 o = _mm256_set1_ps(w.offset[(i0 + i) * w.ld_offset + b]);
        a[i][0] = _mm256_fmadd_ps(o, _mm256_loadu_ps(x.xsum_d + b * kGemmPanelRows), a[i][0]);
        a[i][1] = _mm256_fmadd_ps(o, _mm256_loadu_ps(x.xsum_d + b * kGemmPanelRows + 8), a[i][1]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(acc + i * kGemmPanelRows + 8 * h, a[i][h]);
}

template <bool kVnni, bool kSplit, bool kOffset, bool kU63 = false>
void tile_256_v(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  for (int i0 = 0; i0 < w.n_rows; i0 += 4) {
    const uint8_t* wb = w.w + w.code_offset + i0 * w.row_bytes;
    float* o = acc + i0 * kGemmPanelRows;
    switch (std::min(4, w.n_rows - i0)) {
      case 4: tile_256_r<kVnni, 4, kSplit, kOffset, kU63>(w, wb, x, n_blocks, o, i0); break;
      case 3: tile_256_r<kVnni, 3, kSplit, kOffset, kU63>(w, wb, x, n_blocks, o, i0); break;
      case 2: tile_256_r<kVnni, 2, kSplit, kOffset, kU63>(w, wb, x, n_blocks, o, i0); break;
      default: tile_256_r<kVnni, 1, kSplit, kOffset, kU63>(w, wb, x, n_blocks, o, i0);
    }
  }
}

template <bool kVnni>
void tile_256(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc) {
  if constexpr (!kVnni) {  // the unsigned-code formats (Q4_1, Q5_1, Q4_K, Q5_K) have offsets and one scale
    if (w.codes_0_63 && w.offset && !w.split) return tile_256_v<false, false, true, true>(w, x, n_blocks, acc);
  }
  if (w.split)
    return w.offset ? tile_256_v<kVnni, true, true>(w, x, n_blocks, acc) : tile_256_v<kVnni, true, false>(w, x, n_blocks, acc);
  return w.offset ? tile_256_v<kVnni, false, true>(w, x, n_blocks, acc) : tile_256_v<kVnni, false, false>(w, x, n_blocks, acc);
}

}  // namespace
}  // namespace vlkv::quant
