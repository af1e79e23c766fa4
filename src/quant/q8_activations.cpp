#include "quant/q8_activations.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/cpu_features.h"
#include "base/fp16.h"

namespace vlkv {
namespace {

// As ggml's quantize_row_q8_0: codes use the f32 scale, the stored scale is its f16.
float block_scale(float amax) { return amax / 127.0f; }

void quantize_block_scalar(const float* xb, int8_t* q, float* d, int32_t* half_sum) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
  const float scale = block_scale(amax);
  const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
  int32_t s0 = 0, s1 = 0;
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<int8_t>(std::lround(xb[j] * id));
    (j < 16 ? s0 : s1) += q[j];
  }
  *d = fp16_to_fp32(fp32_to_fp16(scale));
  half_sum[0] = s0;
  half_sum[1] = s1;
}

__attribute__((target("avx2"))) int32_t hsum_epi32_avx2(__m256i s) {
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
  return _mm_cvtsi128_si32(r);
}

// Same codes as the scalar loop, bit for bit: round half away from zero is trunc(v) plus
// sign(v) where |v - trunc(v)| >= 0.5 (that difference is exact in f32).
__attribute__((target("avx2,fma,f16c"))) void quantize_block_avx2(const float* xb, int8_t* q, float* d,
                                                                   int32_t* half_sum) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(xb + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float scale = block_scale(_mm_cvtss_f32(m));
  const __m256 id = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  __m256i codes[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 x = _mm256_mul_ps(v[i], id);
    const __m256 t = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 away = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(x, t), abs_mask), half, _CMP_GE_OQ);
    const __m256 step = _mm256_or_ps(_mm256_and_ps(x, sign_mask), one);  // ±1 with the sign of x
    codes[i] = _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(away, step)));
  }
  const __m256i s01 = _mm256_add_epi32(codes[0], codes[1]), s23 = _mm256_add_epi32(codes[2], codes[3]);
  half_sum[0] = hsum_epi32_avx2(s01);
  half_sum[1] = hsum_epi32_avx2(s23);
  // int32 -> int16 -> int8 with saturation (codes are within ±127); packs interleave lanes.
  const __m256i w16 = _mm256_packs_epi32(codes[0], codes[1]);
  const __m256i w16b = _mm256_packs_epi32(codes[2], codes[3]);
  const __m256i b8 = _mm256_packs_epi16(w16, w16b);
  const __m256i ordered = _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
  *d = fp16_to_fp32(fp32_to_fp16(scale));
}

}  // namespace

void quantize_activations_q8(const float* x, int64_t n, Q8Activations& out) {
  out.n = n;
  out.q.resize(static_cast<size_t>(n));
  out.d.resize(static_cast<size_t>(n / 32));
  out.half_sum.resize(static_cast<size_t>(n / 16));
  const bool avx2 = simd_level() != SimdLevel::kScalar;
  for (int64_t b = 0; b < n / 32; ++b) {
    int8_t* q = out.q.data() + b * 32;
    float* d = out.d.data() + b;
    int32_t* hs = out.half_sum.data() + 2 * b;
    if (avx2) {
      quantize_block_avx2(x + b * 32, q, d, hs);
    } else {
      quantize_block_scalar(x + b * 32, q, d, hs);
    }
  }
}

void interleave_q8_lanes(const Q8Activations* const* rows, int n_rows, Q8Lanes& out) {
  VLKV_CHECK(n_rows >= 1 && n_rows <= kLaneRows);
  const int64_t n = rows[0]->n, nb = n / 32;
  constexpr int kLanes = kLaneRows + 1;
  out.n = n;
  out.n_rows = n_rows;
  out.codes.assign(static_cast<size_t>(nb * 8 * kLanes), 0x80808080u);
  out.d.assign(static_cast<size_t>(nb * kLanes), 0.0f);
  for (int l = 0; l < n_rows; ++l) {
    VLKV_CHECK(rows[l]->n == n);
    out.rows[l] = rows[l];
    const int8_t* q = rows[l]->q.data();
    for (int64_t k = 0; k < nb * 8; ++k) {  // dword k of the row -> lane l of vector k
      uint32_t v;
      std::memcpy(&v, q + 4 * k, 4);
      out.codes[static_cast<size_t>(k * kLanes + l)] = v ^ 0x80808080u;
    }
    for (int64_t b = 0; b < nb; ++b) out.d[static_cast<size_t>(b * kLanes + l)] = rows[l]->d[static_cast<size_t>(b)];
  }
}

}  // namespace vlkv
