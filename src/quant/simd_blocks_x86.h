// The AVX2 / AVX-512 dequantize and dot loops for the block formats. A format
// supplies a decoder that turns one block into groups of 32 small integers plus f32
// scale/offset per 16 (Group32); these loops convert, scale and FMA them in registers.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "quant/quant_internal.h"

// x86 variants are compiled per function with these (no -march flags); the format tables
// pick one per tier. The AVX-512 set includes the AVX2 one, so AVX2 helpers inline into it.
#define VLKV_TARGET_AVX2 VLKV_TARGET(VLKV_ISA_AVX2)
#define VLKV_TARGET_AVX512 VLKV_TARGET(VLKV_ISA_AVX512)

namespace vlkv::quant {

// 32 consecutive weights w[i] = q[i] * s + b, with (s0, b0) for i < 16 and (s1, b1) for i >= 16.
// q holds signed bytes. Formats without an offset leave b at 0 and set kBias = false, so
// w = q * s exactly as ggml computes it (signed zeros included).
struct Group32 {
  __m256i q;
  float s0, s1;
  float b0, b1;
};

// A format's traits (see legacy_blocks_x86.cpp for an example) provide:
//   static constexpr int64_t kBlockElems; static constexpr size_t kBlockBytes;
//   static constexpr int kGroups;      // kBlockElems / 32
//   static constexpr bool kBias;       // whether b0/b1 are used
//   VLKV_TARGET_AVX2 static void decode(const uint8_t* block, Group32* groups);

// An f16 field as f32 (F16C; exact, equal to fp16_to_fp32).
VLKV_TARGET_AVX2 inline float half_f16c(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

VLKV_TARGET_AVX2 inline __m256 cvt_i8x8_avx2(__m128i bytes) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

VLKV_TARGET_AVX2 inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The 32 weights of a group as 4 x 8 floats.
template <bool kBias>
VLKV_TARGET_AVX2 inline void group_weights_avx2(const Group32& g, __m256 w[4]) {
  const __m128i lo = _mm256_castsi256_si128(g.q);
  const __m128i hi = _mm256_extracti128_si256(g.q, 1);
  const __m256 q0 = cvt_i8x8_avx2(lo), q1 = cvt_i8x8_avx2(_mm_srli_si128(lo, 8));
  const __m256 q2 = cvt_i8x8_avx2(hi), q3 = cvt_i8x8_avx2(_mm_srli_si128(hi, 8));
  const __m256 s0 = _mm256_set1_ps(g.s0), s1 = _mm256_set1_ps(g.s1);
  if constexpr (kBias) {
    const __m256 b0 = _mm256_set1_ps(g.b0), b1 = _mm256_set1_ps(g.b1);
    // q*s is exact for every format here, so the fused form rounds once, like ggml's q*s + b.
    w[0] = _mm256_fmadd_ps(q0, s0, b0);
    w[1] = _mm256_fmadd_ps(q1, s0, b0);
    w[2] = _mm256_fmadd_ps(q2, s1, b1);
    w[3] = _mm256_fmadd_ps(q3, s1, b1);
  } else {
    w[0] = _mm256_mul_ps(q0, s0);
    w[1] = _mm256_mul_ps(q1, s0);
    w[2] = _mm256_mul_ps(q2, s1);
    w[3] = _mm256_mul_ps(q3, s1);
  }
}

template <class T>
VLKV_TARGET_AVX2 void dequantize_avx2(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  const int64_t nb = n / T::kBlockElems;
  for (int64_t b = 0; b < nb; ++b, p += T::kBlockBytes) {
    Group32 g[T::kGroups];
    T::decode(p, g);
#pragma GCC unroll 8
    for (int k = 0; k < T::kGroups; ++k) {
      __m256 w[4];
      group_weights_avx2<T::kBias>(g[k], w);
      for (int i = 0; i < 4; ++i) _mm256_storeu_ps(dst + 8 * i, w[i]);
      dst += 32;
    }
  }
}

template <class T>
VLKV_TARGET_AVX2 float dot_avx2(const void* row, const float* x, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t nb = n / T::kBlockElems;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, p += T::kBlockBytes) {
    Group32 g[T::kGroups];
    T::decode(p, g);
#pragma GCC unroll 8
    for (int k = 0; k < T::kGroups; ++k) {
      __m256 w[4];
      group_weights_avx2<T::kBias>(g[k], w);
      acc0 = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(x + 0), acc0);
      acc1 = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(x + 8), acc1);
      acc2 = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(x + 16), acc2);
      acc3 = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(x + 24), acc3);
      x += 32;
    }
  }
  return hsum_avx2(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
}

// The 32 weights of a group as 2 x 16 floats.
template <bool kBias>
VLKV_TARGET_AVX512 inline void group_weights_avx512(const Group32& g, __m512& w0, __m512& w1) {
  const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(g.q)));
  const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(g.q, 1)));
  if constexpr (kBias) {
    w0 = _mm512_fmadd_ps(q0, _mm512_set1_ps(g.s0), _mm512_set1_ps(g.b0));
    w1 = _mm512_fmadd_ps(q1, _mm512_set1_ps(g.s1), _mm512_set1_ps(g.b1));
  } else {
    w0 = _mm512_mul_ps(q0, _mm512_set1_ps(g.s0));
    w1 = _mm512_mul_ps(q1, _mm512_set1_ps(g.s1));
  }
}

template <class T>
VLKV_TARGET_AVX512 void dequantize_avx512(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  const int64_t nb = n / T::kBlockElems;
  for (int64_t b = 0; b < nb; ++b, p += T::kBlockBytes) {
    Group32 g[T::kGroups];
    T::decode(p, g);
#pragma GCC unroll 8
    for (int k = 0; k < T::kGroups; ++k) {
      __m512 w0, w1;
      group_weights_avx512<T::kBias>(g[k], w0, w1);
      _mm512_storeu_ps(dst, w0);
      _mm512_storeu_ps(dst + 16, w1);
      dst += 32;
    }
  }
}

// Four accumulators: groups alternate between pairs (for one-group blocks, two blocks
// are taken per iteration) so consecutive FMAs do not wait on each other.
template <class T>
VLKV_TARGET_AVX512 float dot_avx512(const void* row, const float* x, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t nb = n / T::kBlockElems;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t b = 0;
  if constexpr (T::kGroups == 1) {
    for (; b + 2 <= nb; b += 2, p += 2 * T::kBlockBytes) {
      Group32 g0, g1;
      T::decode(p, &g0);
      T::decode(p + T::kBlockBytes, &g1);
      __m512 w0, w1, w2, w3;
      group_weights_avx512<T::kBias>(g0, w0, w1);
      group_weights_avx512<T::kBias>(g1, w2, w3);
      acc0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + 0), acc0);
      acc1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc1);
      acc2 = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x + 32), acc2);
      acc3 = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x + 48), acc3);
      x += 64;
    }
  }
  for (; b < nb; ++b, p += T::kBlockBytes) {
    Group32 g[T::kGroups];
    T::decode(p, g);
#pragma GCC unroll 8
    for (int k = 0; k < T::kGroups; ++k) {
      __m512 w0, w1;
      group_weights_avx512<T::kBias>(g[k], w0, w1);
      if (k % 2 == 0) {
        acc0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + 0), acc0);
        acc1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc1);
      } else {
        acc2 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + 0), acc2);
        acc3 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc3);
      }
      x += 32;
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

// AVX-512 table form for the 4-bit formats (Q4_0, Q4_1, Q4_K): every weight is lut[code]
// with a 16-entry f32 table per sub-block (computed with the same f32 operations as the
// reference, so the result is bit-identical), so a weight costs a byte widening, a vpermps
// and an FMA instead of widen + convert + scale + FMA. A format's traits add:
//   static constexpr size_t kQsOffset;        // where the code bytes start in a block
//   static constexpr int kChunkBytes;         // 16 or 32 code bytes per chunk
//   static constexpr int kChunks;             // chunks per block
//   VLKV_TARGET_AVX512 static void make_luts(const uint8_t* block, __m512* luts);
// Chunk c holds kChunkBytes weights in its low nibbles (table luts[2c]) followed by
// kChunkBytes weights in its high nibbles (table luts[2c + 1]).
template <class T, bool kStore>
VLKV_TARGET_AVX512 inline void lut_block_avx512(const uint8_t* p, const float* x, float* dst, __m512& acc0,
                                                __m512& acc1, __m512& acc2, __m512& acc3) {
  __m512 luts[2 * T::kChunks];
  T::make_luts(p, luts);
  const uint8_t* qs = p + T::kQsOffset;
#pragma GCC unroll 8
  for (int c = 0; c < T::kChunks; ++c) {
#pragma GCC unroll 2
    for (int h = 0; h < T::kChunkBytes / 16; ++h) {
      const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * h)));
      const __m512 w_lo = _mm512_permutexvar_ps(idx, luts[2 * c]);  // uses the low 4 bits of idx
      const __m512 w_hi = _mm512_permutexvar_ps(_mm512_srli_epi32(idx, 4), luts[2 * c + 1]);
      const int lo = 2 * T::kChunkBytes * c + 16 * h, hi = lo + T::kChunkBytes;
      if constexpr (kStore) {
        _mm512_storeu_ps(dst + lo, w_lo);
        _mm512_storeu_ps(dst + hi, w_hi);
      } else if ((c + h) % 2 == 0) {
        acc0 = _mm512_fmadd_ps(w_lo, _mm512_loadu_ps(x + lo), acc0);
        acc1 = _mm512_fmadd_ps(w_hi, _mm512_loadu_ps(x + hi), acc1);
      } else {
        acc2 = _mm512_fmadd_ps(w_lo, _mm512_loadu_ps(x + lo), acc2);
        acc3 = _mm512_fmadd_ps(w_hi, _mm512_loadu_ps(x + hi), acc3);
      }
    }
    qs += T::kChunkBytes;
  }
}

template <class T>
VLKV_TARGET_AVX512 float dot_lut_avx512(const void* row, const float* x, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t nb = n / T::kBlockElems;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t b = 0;
  if constexpr (T::kChunks == 1 && T::kChunkBytes == 16) {  // two small blocks per step: 4 chains
    for (; b + 2 <= nb; b += 2, p += 2 * T::kBlockBytes, x += 2 * T::kBlockElems) {
      lut_block_avx512<T, false>(p, x, nullptr, acc0, acc1, acc2, acc3);
      lut_block_avx512<T, false>(p + T::kBlockBytes, x + T::kBlockElems, nullptr, acc2, acc3, acc0, acc1);
    }
  }
  for (; b < nb; ++b, p += T::kBlockBytes, x += T::kBlockElems) {
    lut_block_avx512<T, false>(p, x, nullptr, acc0, acc1, acc2, acc3);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

template <class T>
VLKV_TARGET_AVX512 void dequantize_lut_avx512(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  const int64_t nb = n / T::kBlockElems;
  __m512 unused = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, p += T::kBlockBytes, dst += T::kBlockElems) {
    lut_block_avx512<T, true>(p, nullptr, dst, unused, unused, unused, unused);
  }
}

// Codes 0..15 as floats, the argument of every table.
VLKV_TARGET_AVX512 inline __m512 iota16_ps() {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

// Helpers for decoders: the low / high nibbles of 16 bytes as 32 bytes [lo | hi].
VLKV_TARGET_AVX2 inline __m256i nibbles_lo_hi(const uint8_t* qs16) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs16));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// Byte i = 0x10 if bit i of bits is set, else 0 (the fifth bit of Q5_0 / Q5_1 weights).
VLKV_TARGET_AVX2 inline __m256i bits_to_0x10(uint32_t bits) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

}  // namespace vlkv::quant
