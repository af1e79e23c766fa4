// Q8_0: blocks of 32 weights, one f16 scale d and 32 signed bytes.
// Layout (34 bytes): d | qs[32]; w = qs[j] * d.
#include "base/check.h"
#include "quant/q8_dot.h"
#include "quant/simd_blocks.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = 32;
constexpr size_t kBytes = 34;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const auto* qs = reinterpret_cast<const int8_t*>(p + 2);
    for (int j = 0; j < kQk; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

// ggml's quantize_row_q8_0_ref: d = amax / 127, codes rounded half away from zero.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    for (int j = 0; j < kQk; ++j) {
      p[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(src[j] * id)));
    }
  }
}

struct Traits {
  static constexpr int64_t kBlockElems = kQk;
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr int kGroups = 1;
  static constexpr bool kBias = false;
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    g->q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    g->s0 = g->s1 = half_f16c(p);
    g->b0 = g->b1 = 0.0f;
  }
};

using Kernels = BlockKernels<Traits, dequantize_ref>;

// 64 products of two consecutive blocks (at pb) with their 64 activation codes, as 16 int32:
// 8 partial sums per block, block 0 in the low half. VNNI takes unsigned x signed bytes, so
// |w| times x with the sign of w moved onto x (AVX-512 has no vpsignb: a masked negate).
// The 64 weight codes of two consecutive blocks at pb (block 0 in the low half).
VLKV_TARGET_AVX512_VNNI inline __m512i load_block_pair(const uint8_t* pb) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 2))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + kBytes + 2)), 1);
}

VLKV_TARGET_AVX512_VNNI inline __m512i block_pair_products(const uint8_t* pb, const int8_t* xq) {
  const __m512i w = load_block_pair(pb);
  const __m512i xv = _mm512_loadu_si512(xq);
  const __m512i xs = _mm512_mask_sub_epi8(xv, _mm512_movepi8_mask(w), _mm512_setzero_si512(), xv);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), xs);
}

// Decode's hot loop (most of a Q8_0 model's decode time): four blocks per iteration in two
// 512-bit halves; their four f16 weight scales are converted together and multiplied by the
// activation scales, then spread over each block's 8 lanes with one permute per pair.
VLKV_TARGET_AVX512_VNNI float dot_q8_avx512(const void* row, const Q8Activations& x, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t nb = n / kQk;
  const int8_t* xq = x.q.data();
  const float* xd = x.d.data();
  const __m512i lo_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i hi_pair = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4, p += 4 * kBytes, xq += 4 * kQk) {
    __m128i dh = _mm_cvtsi32_si128(load_u16(p));
    dh = _mm_insert_epi16(dh, load_u16(p + kBytes), 1);
    dh = _mm_insert_epi16(dh, load_u16(p + 2 * kBytes), 2);
    dh = _mm_insert_epi16(dh, load_u16(p + 3 * kBytes), 3);
    const __m512 s = _mm512_zextps128_ps512(_mm_mul_ps(_mm_cvtph_ps(dh), _mm_loadu_ps(xd + b)));
    const __m512i p01 = block_pair_products(p, xq);
    const __m512i p23 = block_pair_products(p + 2 * kBytes, xq + 2 * kQk);
    acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p01), _mm512_permutexvar_ps(lo_pair, s), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p23), _mm512_permutexvar_ps(hi_pair, s), acc1);
  }
  const __m512 acc = _mm512_add_ps(acc0, acc1);  // halves, not _mm512_reduce_add_ps (GCC 12 warns)
  float sum = hsum_avx2(_mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
  for (; b < nb; ++b, p += kBytes, xq += kQk) {  // at most 3 blocks left
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
    const __m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
    sum += hsum_avx2(_mm256_cvtepi32_ps(d)) * (half_f16c(p) * xd[b]);
  }
  return sum;
}

// Dispatch: the 512-bit kernel where the CPU has AVX-512 VNNI, else the shared loops.
float dot_q8(const void* row, const Q8Activations& x, int64_t n) {
  if (simd_tier() == SimdTier::kAvx512Vnni) return dot_q8_avx512(row, x, n);
  return dot_q8_dispatch<Traits, dequantize_ref>(row, x, n);
}

// The end of dot_q8_avx512 for one (weight row, activation row) pair: the two accumulators'
// sum, then blocks [b, nb) (at most 3) one at a time from the row's block b at pb.
VLKV_TARGET_AVX512_VNNI inline float finish_dot(__m512 acc0, __m512 acc1, const uint8_t* pb, const Q8Activations& x,
                                                int64_t b, int64_t nb) {
  const __m512 acc = _mm512_add_ps(acc0, acc1);
  float sum = hsum_avx2(_mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
  const int8_t* xq = x.q.data() + b * kQk;
  for (int64_t bt = b; bt < nb; ++bt, pb += kBytes, xq += kQk) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 2));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
    const __m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
    sum += hsum_avx2(_mm256_cvtepi32_ps(d)) * (half_f16c(pb) * x.d[static_cast<size_t>(bt)]);
  }
  return sum;
}

// dot_q8_avx512 of one weight row with NX activation rows, bit for bit: the same int32 lane
// sums and the same f32 steps per row. The lane sums come as (x + 128) . w - 128 . sum(w) (x
// as VNNI's unsigned operand, w signed) instead of |w| . (x signed by w), so the weight side
// (loads, 128 . sum(w), the four f16 scales) is done once for all NX rows and each row costs
// one xor, one dpbusd and one subtract per 64 weights. Integer sums are exact: equal lanes.
template <int NX>
VLKV_TARGET_AVX512_VNNI void dot_q8_rows_avx512(const void* row, const Q8Activations* const* xs, int64_t n,
                                                float* out) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t nb = n / kQk;
  const __m512i lo_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i hi_pair = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));  // as u8: 128; x ^ 0x80 = x + 128
  __m512 acc0[NX], acc1[NX];
  const int8_t* xq_base[NX];  // the rows' codes and scales, loaded once (not per block)
  const float* xd_base[NX];
  for (int t = 0; t < NX; ++t) {
    acc0[t] = acc1[t] = _mm512_setzero_ps();
    xq_base[t] = xs[t]->q.data();
    xd_base[t] = xs[t]->d.data();
  }
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4, p += 4 * kBytes) {
    __m128i dh = _mm_cvtsi32_si128(load_u16(p));
    dh = _mm_insert_epi16(dh, load_u16(p + kBytes), 1);
    dh = _mm_insert_epi16(dh, load_u16(p + 2 * kBytes), 2);
    dh = _mm_insert_epi16(dh, load_u16(p + 3 * kBytes), 3);
    const __m128 dw = _mm_cvtph_ps(dh);
    const __m512i w01 = load_block_pair(p), w23 = load_block_pair(p + 2 * kBytes);
    const __m512i c01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w01);  // 128 . w per lane
    const __m512i c23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w23);
#pragma GCC unroll 8
    for (int t = 0; t < NX; ++t) {
      const int8_t* xq = xq_base[t] + b * kQk;
      const __m512i x01 = _mm512_xor_si512(_mm512_loadu_si512(xq), bias);
      const __m512i x23 = _mm512_xor_si512(_mm512_loadu_si512(xq + 2 * kQk), bias);
      const __m512i p01 = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x01, w01), c01);
      const __m512i p23 = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x23, w23), c23);
      const __m512 sc = _mm512_zextps128_ps512(_mm_mul_ps(dw, _mm_loadu_ps(xd_base[t] + b)));
      acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p01), _mm512_permutexvar_ps(lo_pair, sc), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p23), _mm512_permutexvar_ps(hi_pair, sc), acc1[t]);
    }
  }
  for (int t = 0; t < NX; ++t) out[t] = finish_dot(acc0[t], acc1[t], p, *xs[t], b, nb);
}

void dot_q8_rows(const void* row, const Q8Activations* const* xs, int n_x, int64_t n, float* out) {
  if (simd_level() != SimdLevel::kAvx512 || !cpu_features().avx512vnni) {
    for (int t = 0; t < n_x; ++t) out[t] = dot_q8(row, *xs[t], n);
    return;
  }
  switch (n_x) {
    case 1: return dot_q8_rows_avx512<1>(row, xs, n, out);
    case 2: return dot_q8_rows_avx512<2>(row, xs, n, out);
    case 3: return dot_q8_rows_avx512<3>(row, xs, n, out);
    case 4: return dot_q8_rows_avx512<4>(row, xs, n, out);
    case 5: return dot_q8_rows_avx512<5>(row, xs, n, out);
    case 6: return dot_q8_rows_avx512<6>(row, xs, n, out);
    case 7: return dot_q8_rows_avx512<7>(row, xs, n, out);
    case 8: return dot_q8_rows_avx512<8>(row, xs, n, out);
    default: VLKV_CHECK_MSG(false, "dot_q8_rows: at most kMaxDotRows rows");
  }
}

// dot_q8_avx512 of R weight rows with T activation rows, bit for bit, as dot_q8_rows_avx512
// per pair; the weight side (codes, 128 . sum(w), scales spread over lanes) is prepared once
// per R x T tile and the activation side comes prepared (Q8Activations::biased, pair_d), so
// each loaded activation vector serves R weight rows: the decode GEMM of a large batch is
// bound by these multiply-adds, not by the activations streamed from L2 per weight row.
// The scale of a lane is dw * dx either way (a product does not depend on where its
// factors were spread over lanes).
template <int R, int T>
VLKV_TARGET_AVX512_VNNI void dot_q8_tile_avx512(const void* const* rows, const Q8Activations* const* xs, int64_t n,
                                                float* out) {
  const int64_t nb = n / kQk;
  const __m512i lo_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i hi_pair = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc0[R][T], acc1[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc0[i][t] = acc1[i][t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    __m512i w01[R], w23[R], c01[R], c23[R];
    __m512 dlo[R], dhi[R];
    for (int i = 0; i < R; ++i) {
      const uint8_t* p = static_cast<const uint8_t*>(rows[i]) + b * kBytes;
      __m128i dh = _mm_cvtsi32_si128(load_u16(p));
      dh = _mm_insert_epi16(dh, load_u16(p + kBytes), 1);
      dh = _mm_insert_epi16(dh, load_u16(p + 2 * kBytes), 2);
      dh = _mm_insert_epi16(dh, load_u16(p + 3 * kBytes), 3);
      const __m512 dw = _mm512_zextps128_ps512(_mm_cvtph_ps(dh));
      dlo[i] = _mm512_permutexvar_ps(lo_pair, dw);
      dhi[i] = _mm512_permutexvar_ps(hi_pair, dw);
      w01[i] = load_block_pair(p);
      w23[i] = load_block_pair(p + 2 * kBytes);
      // -128 . w per lane: the accumulator the activation dots start from (exact int32)
      c01[i] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w01[i]));
      c23[i] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w23[i]));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const uint8_t* xu = xs[t]->biased.data() + b * kQk;
      const float* xd = xs[t]->pair_d.data() + b * 8;  // 16 lanes per pair of blocks
      const __m512i x01 = _mm512_loadu_si512(xu), x23 = _mm512_loadu_si512(xu + 2 * kQk);
      const __m512 elo = _mm512_loadu_ps(xd), ehi = _mm512_loadu_ps(xd + 16);
#pragma GCC unroll 2
      for (int i = 0; i < R; ++i) {
        const __m512i p01 = _mm512_dpbusd_epi32(c01[i], x01, w01[i]);
        const __m512i p23 = _mm512_dpbusd_epi32(c23[i], x23, w23[i]);
        acc0[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p01), _mm512_mul_ps(dlo[i], elo), acc0[i][t]);
        acc1[i][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p23), _mm512_mul_ps(dhi[i], ehi), acc1[i][t]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t)
      out[i * T + t] = finish_dot(acc0[i][t], acc1[i][t], static_cast<const uint8_t*>(rows[i]) + b * kBytes, *xs[t], b, nb);
}

template <int R>
void dot_q8_tile_rows(const void* const* rows, const Q8Activations* const* xs, int n_x, int64_t n, float* out) {
  switch (n_x) {
    case 1: return dot_q8_tile_avx512<R, 1>(rows, xs, n, out);
    case 2: return dot_q8_tile_avx512<R, 2>(rows, xs, n, out);
    case 3: return dot_q8_tile_avx512<R, 3>(rows, xs, n, out);
    case 4: return dot_q8_tile_avx512<R, 4>(rows, xs, n, out);
    default: VLKV_CHECK_MSG(false, "dot_q8_tile: at most kMaxTileX activation rows");
  }
}

void dot_q8_tile(const void* const* rows, int n_rows, const Q8Activations* const* xs, int n_x, int64_t n, float* out) {
  VLKV_CHECK(n_rows >= 1 && n_rows <= kMaxTileRows && n_x >= 1 && n_x <= kMaxTileX);
  bool prepared = simd_level() == SimdLevel::kAvx512 && cpu_features().avx512vnni && n % 64 == 0;
  for (int t = 0; t < n_x && prepared; ++t)
    prepared = xs[t]->biased.size() == static_cast<size_t>(n) && xs[t]->pair_d.size() == static_cast<size_t>(n / 4);
  if (!prepared) {  // the contract's definition, pair by pair
    for (int i = 0; i < n_rows; ++i)
      for (int t = 0; t < n_x; ++t) out[i * n_x + t] = dot_q8(rows[i], *xs[t], n);
    return;
  }
  if (n_rows == 2) return dot_q8_tile_rows<2>(rows, xs, n_x, n, out);
  return dot_q8_tile_rows<1>(rows, xs, n_x, n, out);
}

}  // namespace

const WeightFormat kQ8_0Format = {GgmlType::kQ8_0, "q8_0", kQk, kBytes, dequantize_ref, quantize_ref,
                                  Kernels::dequantize, Kernels::dot,
                                  dot_q8, dot_q8_rows, dot_q8_tile};

}  // namespace vlkv::quant
