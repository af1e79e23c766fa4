// AVX2 and AVX-512 micro-kernels of the exact f32 prefill GEMM (gemm_f32.h): an M x 2-vector
// tile of y in registers, one broadcast token value times two packed weight vectors per column.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "base/simd_dispatch.h"
#include "kernels/exp_poly.h"
#include "kernels/gemm_f32.h"

// GCC 12: the AVX-512 min/max/roundscale/shuffle intrinsics' undefined pass-through operand
// trips -W(maybe-)uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace vlkv {
namespace {

// Tile shapes: accumulators + two weight vectors + one broadcast fit the register file
// (16 ymm for AVX2: 6 x 2 = 12 + 3; 32 zmm for AVX-512: 12 x 2 = 24 + 3).
constexpr int kAvx2Mr = 6, kAvx2Nr = 16;
constexpr int kAvx512Mr = 12, kAvx512Nr = 32;

template <int M>
VLKV_TARGET(VLKV_ISA_AVX2) void gemm_avx2(const float* a, int64_t lda, const float* b, int64_t kc, float* c,
                                          int64_t ldc, bool accumulate) {
  __m256 c0[M], c1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    c0[i] = accumulate ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
    c1[i] = accumulate ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * kAvx2Nr), b1 = _mm256_loadu_ps(b + k * kAvx2Nr + 8);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + k);
      c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    _mm256_storeu_ps(c + i * ldc, c0[i]);
    _mm256_storeu_ps(c + i * ldc + 8, c1[i]);
  }
}

template <int M>
VLKV_TARGET(VLKV_ISA_AVX512) void gemm_avx512(const float* a, int64_t lda, const float* b, int64_t kc, float* c,
                                              int64_t ldc, bool accumulate) {
  __m512 c0[M], c1[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    c0[i] = accumulate ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    c1[i] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b + k * kAvx512Nr), b1 = _mm512_loadu_ps(b + k * kAvx512Nr + 16);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * lda + k]);
      c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    _mm512_storeu_ps(c + i * ldc, c0[i]);
    _mm512_storeu_ps(c + i * ldc + 16, c1[i]);
  }
}

// Horizontal reductions through memory (GCC 12 warns falsely about _mm512_reduce_*'s
// pass-through operand); they run once per row.
VLKV_TARGET(VLKV_ISA_AVX2) float hsum256(__m256 v) {
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
VLKV_TARGET(VLKV_ISA_AVX2) float hmax256(__m256 v) {
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  return *std::max_element(l, l + 8);
}

// exp_poly.h's formula on 8 lanes (the tail of a row goes through the same formula, fused alike).
VLKV_TARGET(VLKV_ISA_AVX2) __m256 exp_avx2(__m256 s, __m256 scale, __m256 shift) {
  using namespace exp_poly;
  __m256 x = _mm256_sub_ps(_mm256_mul_ps(s, scale), shift);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kMin)), _mm256_set1_ps(kMax));
  const __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(kLog2e), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kP0), r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
}

VLKV_TARGET(VLKV_ISA_AVX2) float row_max_avx2(const float* s, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + i));
  float r = hmax256(m);
  for (; i < n; ++i) r = s[i] > r ? s[i] : r;
  return r;
}

VLKV_TARGET(VLKV_ISA_AVX2) float exp_sum_avx2(float* s, int64_t n, float scale, float shift) {
  const __m256 vs = _mm256_set1_ps(scale), vh = _mm256_set1_ps(shift);
  __m256 sum = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_avx2(_mm256_loadu_ps(s + i), vs, vh);
    _mm256_storeu_ps(s + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  float total = hsum256(sum);
  if (i < n) {  // the tail through a zero-padded vector; its padding lanes are not summed
    alignas(32) float t[8] = {};
    const int rest = static_cast<int>(n - i);
    std::copy_n(s + i, rest, t);
    _mm256_store_ps(t, exp_avx2(_mm256_load_ps(t), vs, vh));
    for (int j = 0; j < rest; ++j) {
      s[i + j] = t[j];
      total += t[j];
    }
  }
  return total;
}

VLKV_TARGET(VLKV_ISA_AVX512) __m512 exp_avx512(__m512 s, __m512 scale, __m512 shift) {
  using namespace exp_poly;
  __m512 x = _mm512_sub_ps(_mm512_mul_ps(s, scale), shift);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kMin)), _mm512_set1_ps(kMax));
  const __m512 fx = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f)),
                                         _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kP0), r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(fx), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
}

VLKV_TARGET(VLKV_ISA_AVX512) float row_max_avx512(const float* s, int64_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + i));
  if (i < n) {  // masked tail: the other lanes keep m
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, s + i));
  }
  alignas(64) float l[16];
  _mm512_store_ps(l, m);
  return *std::max_element(l, l + 16);
}

VLKV_TARGET(VLKV_ISA_AVX512) float exp_sum_avx512(float* s, int64_t n, float scale, float shift) {
  const __m512 vs = _mm512_set1_ps(scale), vh = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp_avx512(_mm512_loadu_ps(s + i), vs, vh);
    _mm512_storeu_ps(s + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (i < n) {  // masked tail: its padding lanes are neither stored nor summed
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = exp_avx512(_mm512_maskz_loadu_ps(m, s + i), vs, vh);
    _mm512_mask_storeu_ps(s + i, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  alignas(64) float l[16];
  _mm512_store_ps(l, sum);
  float total = 0.0f;
  for (float v : l) total += v;
  return total;
}

// Panel packing (GemmF32Kernels::pack): 8x8 (AVX2) or 16x16 (AVX-512) blocks transposed in
// registers, rows j of the block becoming consecutive lanes of panel row k. A group with fewer
// rows than nr, and the columns past the last whole block, go through the scalar pack.
VLKV_TARGET(VLKV_ISA_AVX2) void transpose8(const float* src, int64_t ld, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

VLKV_TARGET(VLKV_ISA_AVX512) void transpose16(const float* src, int64_t ld, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // 2x2 blocks of pairs
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // 4x4 blocks within each 128-bit lane
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // 128-bit lanes across rows 4 apart
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + i + 4], 0x88);
      t[8 * h + i + 4] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + i + 4], 0xdd);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // and rows 8 apart
    _mm512_storeu_ps(dst + i * ldd, _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88));
    _mm512_storeu_ps(dst + (i + 8) * ldd, _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd));
  }
}

template <int B, void (*Transpose)(const float*, int64_t, float*, int64_t)>
void pack_blocks(const float* rows, int64_t ld, int n_rows, int64_t kc, int nr, float* panel) {
  if (n_rows < nr) {
    gemm_f32_pack_scalar(rows, ld, n_rows, kc, nr, panel);
    return;
  }
  const int64_t k_whole = kc / B * B;
  for (int j = 0; j < nr; j += B)
    for (int64_t k = 0; k < k_whole; k += B) Transpose(rows + j * ld + k, ld, panel + k * nr + j, nr);
  for (int64_t k = k_whole; k < kc; ++k)
    for (int j = 0; j < nr; ++j) panel[k * nr + j] = rows[j * ld + k];
}

template <int M> struct Avx2K { static constexpr GemmF32Fn fn = &gemm_avx2<M>; };
template <int M> struct Avx512K { static constexpr GemmF32Fn fn = &gemm_avx512<M>; };

}  // namespace

const GemmF32Kernels kGemmF32Avx2 = make_gemm_f32_table<kAvx2Mr, kAvx2Nr, Avx2K>(&row_max_avx2, &exp_sum_avx2,
                                                                                 &pack_blocks<8, &transpose8>);
const GemmF32Kernels kGemmF32Avx512 = make_gemm_f32_table<kAvx512Mr, kAvx512Nr, Avx512K>(
    &row_max_avx512, &exp_sum_avx512, &pack_blocks<16, &transpose16>);

}  // namespace vlkv
