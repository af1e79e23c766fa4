// AVX2 and AVX-512 micro-kernels of the exact f32 prefill GEMM (gemm_f32.h): an M x 2-vector
// tile of y in registers, one broadcast token value times two packed weight vectors per column.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "base/simd_dispatch.h"
#include "kernels/exp_poly.h"
#include "kernels/gemm_f32.h"

// GCC 12: the AVX-512 min/max/roundscale intrinsics' undefined pass-through operand trips
// -Wmaybe-uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

template <int M> struct Avx2K { static constexpr GemmF32Fn fn = &gemm_avx2<M>; };
template <int M> struct Avx512K { static constexpr GemmF32Fn fn = &gemm_avx512<M>; };

}  // namespace

const GemmF32Kernels kGemmF32Avx2 = make_gemm_f32_table<kAvx2Mr, kAvx2Nr, Avx2K>(&row_max_avx2, &exp_sum_avx2);
const GemmF32Kernels kGemmF32Avx512 = make_gemm_f32_table<kAvx512Mr, kAvx512Nr, Avx512K>(&row_max_avx512, &exp_sum_avx512);

}  // namespace vlkv
