// AVX2 and AVX-512 micro-kernels of the exact f32 prefill GEMM (gemm_f32.h): the loops of
// gemm_f32_loops.inc (an M x 2-vector tile of y in registers, one broadcast token value times
// two packed weight vectors per column; the exp polynomial) once per tier, plus each tier's
// row tails and horizontal reductions (their orders are part of the results).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "base/simd_dispatch.h"
#include "base/vec_f32_x86.h"
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

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2)
namespace avx2 {

using VecOps = x86::F32x8;
#include "kernels/gemm_f32_loops.inc"

// Horizontal reductions through memory (GCC 12 warns falsely about _mm512_reduce_*'s
// pass-through operand); they run once per row.
float hsum256(__m256 v) {
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
float hmax256(__m256 v) {
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  return *std::max_element(l, l + 8);
}

float row_max(const float* s, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t i = max_vectors(s, n, m);
  float r = hmax256(m);
  for (; i < n; ++i) r = s[i] > r ? s[i] : r;
  return r;
}

float exp_sum(float* s, int64_t n, float scale, float shift) {
  const __m256 vs = _mm256_set1_ps(scale), vh = _mm256_set1_ps(shift);
  __m256 sum = _mm256_setzero_ps();
  const int64_t i = exp_vectors(s, n, vs, vh, sum);
  float total = hsum256(sum);
  if (i < n) {  // the tail through a zero-padded vector (exp_vec alike); its padding lanes are not summed
    alignas(32) float t[8] = {};
    const int rest = static_cast<int>(n - i);
    std::copy_n(s + i, rest, t);
    _mm256_store_ps(t, exp_vec(_mm256_load_ps(t), vs, vh));
    for (int j = 0; j < rest; ++j) {
      s[i + j] = t[j];
      total += t[j];
    }
  }
  return total;
}

template <int M> struct Tile { static constexpr GemmF32Fn fn = &gemm_tile<M>; };

}  // namespace avx2
VLKV_TARGET_END

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512)
namespace avx512 {

using VecOps = x86::F32x16;
#include "kernels/gemm_f32_loops.inc"

float row_max(const float* s, int64_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  const int64_t i = max_vectors(s, n, m);
  if (i < n) {  // masked tail: the other lanes keep m
    const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
    m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, s + i));
  }
  alignas(64) float l[16];
  _mm512_store_ps(l, m);
  return *std::max_element(l, l + 16);
}

float exp_sum(float* s, int64_t n, float scale, float shift) {
  const __m512 vs = _mm512_set1_ps(scale), vh = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  const int64_t i = exp_vectors(s, n, vs, vh, sum);
  if (i < n) {  // masked tail: its padding lanes are neither stored nor summed
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = exp_vec(_mm512_maskz_loadu_ps(m, s + i), vs, vh);
    _mm512_mask_storeu_ps(s + i, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  alignas(64) float l[16];
  _mm512_store_ps(l, sum);
  float total = 0.0f;
  for (float v : l) total += v;
  return total;
}

template <int M> struct Tile { static constexpr GemmF32Fn fn = &gemm_tile<M>; };

}  // namespace avx512
VLKV_TARGET_END

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

}  // namespace

const GemmF32Kernels kGemmF32Avx2 =
    make_gemm_f32_table<kAvx2Mr, kAvx2Nr, avx2::Tile>(&avx2::row_max, &avx2::exp_sum, &pack_blocks<8, &transpose8>);
const GemmF32Kernels kGemmF32Avx512 = make_gemm_f32_table<kAvx512Mr, kAvx512Nr, avx512::Tile>(
    &avx512::row_max, &avx512::exp_sum, &pack_blocks<16, &transpose16>);

}  // namespace vlkv
