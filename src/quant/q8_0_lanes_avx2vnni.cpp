// AVX-VNNI (256-bit vpdpbusd) kernels of q8_0_lanes.h: 8 lanes per vector, the same per-lane
// steps as the AVX-512 VNNI file. Strided: 8 weight rows per pass. Lanes: Q8Lanes' 16 lanes as
// two halves, the high half first, whose lane 15 (x = 0) gives the bias w . 128 of both.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "base/simd_dispatch.h"
#include "quant/q8_0_lanes.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX2_VNNI)
namespace vlkv::quant::q8lanes {
namespace {

// 8 vectors v[r] (row r's 8 partial sums of one block) -> one vector of the 8 rows' block sums.
inline __m256i reduce_rows8(const __m256i* v) {
  __m256i u[4], w[2];
  for (int k = 0; k < 4; ++k)  // per 128-bit lane: rows 2k, 2k+1, two partial sums each
    u[k] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  for (int k = 0; k < 2; ++k)  // per 128-bit lane: rows 4k..4k+3, that lane's sum
    w[k] = _mm256_add_epi32(_mm256_unpacklo_epi64(u[2 * k], u[2 * k + 1]), _mm256_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(w[0], w[1], 0x20), _mm256_permute2x128_si256(w[0], w[1], 0x31));
}

// out[r] for n_rows <= 8 rows at base + r * stride.
void strided8(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  const uint8_t* rows[8];
  for (int r = 0; r < 8; ++r) rows[r] = base + (r < n_rows ? r : 0) * stride;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i xb =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + b * kQk)), bias);
    __m256i v[8];
    for (int r = 0; r < 8; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + b * kBytes + 2));
      v[r] = _mm256_sub_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), xb, wv),
                              _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), bias, wv));
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

// 8 lanes (half h of Q8Lanes) of one block of one weight row: the exact sums, bias not removed.
inline __m256i half_sums(const uint32_t* xb, int h, const uint8_t* wb) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;  // two chains: vpdpbusd's latency
  for (int k = 0; k < 8; k += 2) {
    s0 = _mm256_dpbusd_avx_epi32(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + k * kLanes + 8 * h)),
                                 _mm256_set1_epi32(static_cast<int32_t>(load_u32(wb + 2 + 4 * k))));
    s1 = _mm256_dpbusd_avx_epi32(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + (k + 1) * kLanes + 8 * h)),
                                 _mm256_set1_epi32(static_cast<int32_t>(load_u32(wb + 6 + 4 * k))));
  }
  return _mm256_add_epi32(s0, s1);
}

// R (<= 4: two accumulators each in 16 registers) weight rows against the 16 lanes.
template <int R>
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
      __m256i sh = half_sums(xb, 1, wb);
      const __m256i bias = _mm256_permutevar8x32_epi32(sh, k7);  // lane 15: w . 128
      sh = _mm256_sub_epi32(sh, bias);
      const __m256i sl = _mm256_sub_epi32(half_sums(xb, 0, wb), bias);
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

}  // namespace

void strided_avx2vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  for (int r0 = 0; r0 < n_rows; r0 += 8) strided8(base + r0 * stride, stride, std::min(8, n_rows - r0), x, n, out + r0);
}

void lanes_avx2vnni(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  for (int i0 = 0; i0 < n_rows; i0 += 4) {
    const void* const* r = rows + i0;
    float* o = out + i0 * kLanes;
    switch (std::min(4, n_rows - i0)) {
      case 4: lanes_r<4>(r, x, n, o); break;
      case 3: lanes_r<3>(r, x, n, o); break;
      case 2: lanes_r<2>(r, x, n, o); break;
      default: lanes_r<1>(r, x, n, o);
    }
  }
}

}  // namespace vlkv::quant::q8lanes
VLKV_TARGET_END
