// AVX-512 VNNI kernels of q8_0_lanes.h: 16 lanes per vector.
// Every header is included above the target region (base/simd_dispatch.h says why).
#include <immintrin.h>

#include <cstdint>

#include "base/simd_dispatch.h"
#include "quant/q8_0_lanes.h"

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI)
namespace vlkv::quant::q8lanes {
namespace {

// The 64 weight codes of blocks b, b + 1 at pb (block b in the low half); `two` false: the
// high half zero (the row's last block).
inline __m512i load_block_pair(const uint8_t* pb, bool two) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 2));
  const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + kBytes + 2)) : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 16 vectors v[r] (row r: block b's 8 partial sums in lanes 0-7, block b + 1's in 8-15) ->
// a[r] = row r's block b sum, c[r] = its block b + 1 sum (exact int32 adds in a tree).
inline void reduce_rows16(const __m512i* v, __m512i* a, __m512i* c) {
  __m512i u[8], w[4], z[2];
  for (int k = 0; k < 8; ++k)  // per 128-bit lane: rows 2k, 2k+1, two partial sums each
    u[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  for (int k = 0; k < 4; ++k)  // per 128-bit lane: rows 4k..4k+3, that lane's sum
    w[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * k], u[2 * k + 1]), _mm512_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
  for (int k = 0; k < 2; ++k)  // [b rows 8k..+3, b+1 rows 8k..+3, b rows 8k+4..+7, b+1 rows 8k+4..+7]
    z[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  *a = _mm512_shuffle_i32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0));
  *c = _mm512_shuffle_i32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1));
}

// out[r] for n_rows <= 16 weight rows at base + r * stride (stride 0: one row in every lane)
// with one activation row. Lanes = weight rows: per pair of blocks each row's 64 products
// (x + 128 unsigned, so w . (x + 128) - w . 128), the 16 rows' partial sums reduced into one
// vector per block, then each block's f32 step for all 16 rows at once.
void strided(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  const uint8_t* rows[kLanes];
  alignas(64) int32_t offsets[kLanes];
  for (int r = 0; r < kLanes; ++r) {
    const int64_t at = (r < n_rows ? r : 0) * stride;
    rows[r] = base + at;
    offsets[r] = static_cast<int32_t>(at);
  }
  const __m512i idx = _mm512_load_si512(offsets);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    const __mmask64 m = two ? ~__mmask64{0} : __mmask64{0xFFFFFFFF};
    const __m512i xb = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x.q.data() + b * kQk), bias);
    const __m512i bx = _mm512_maskz_mov_epi8(m, bias);
    __m512i v[kLanes];
    for (int r = 0; r < kLanes; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + b * kBytes + kPrefetchBytes), _MM_HINT_T0);
    for (int r = 0; r < kLanes; ++r) {
      const __m512i wv = load_block_pair(rows[r] + b * kBytes, two);
      v[r] = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xb, wv),
                              _mm512_dpbusd_epi32(_mm512_setzero_si512(), bx, wv));
    }
    __m512i sa, sc;
    reduce_rows16(v, &sa, &sc);
    // f16 scales of the 16 rows' block b (low 16 bits of each gathered dword)
    const __m512i ga = _mm512_i32gather_epi32(idx, base + b * kBytes, 1);
    const __m512 dwa = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(ga));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sa), _mm512_mul_ps(dwa, _mm512_set1_ps(x.d[static_cast<size_t>(b)])), acc);
    if (two) {
      const __m512i gc = _mm512_i32gather_epi32(idx, base + (b + 1) * kBytes, 1);
      const __m512 dwc = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(gc));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sc), _mm512_mul_ps(dwc, _mm512_set1_ps(x.d[static_cast<size_t>(b + 1)])),
                            acc);
    }
  }
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, acc);
  for (int r = 0; r < n_rows; ++r) out[r] = lanes[r];
}

// out[i * 16 + l] for R weight rows and the activation rows in the lanes of x (Q8Lanes: lane 15
// holds x = 0, whose sum w . 128 is the bias every lane subtracts). Lanes = activation rows:
// per block, 8 vpdpbusd per weight row (4 weight bytes broadcast against 16 rows' 4 codes).
template <int R>
void lanes_r(const void* const* rows, const Q8Lanes& x, int64_t n, float* out) {
  const int64_t nb = n / kQk;
  const __m512i k15 = _mm512_set1_epi32(kLanes - 1);
  __m512 acc[R];
  for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint32_t* xb = x.codes.data() + b * 8 * kLanes;
    __m512i xv[8];
    for (int k = 0; k < 8; ++k) xv[k] = _mm512_loadu_si512(xb + k * kLanes);
    const __m512 dx = _mm512_loadu_ps(x.d.data() + b * kLanes);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const uint8_t* wb = static_cast<const uint8_t*>(rows[i]) + b * kBytes;
      __m512i s0 = _mm512_setzero_si512(), s1 = s0;  // two chains: vpdpbusd's latency
      for (int k = 0; k < 8; k += 2) {
        s0 = _mm512_dpbusd_epi32(s0, xv[k], _mm512_set1_epi32(static_cast<int32_t>(load_u32(wb + 2 + 4 * k))));
        s1 = _mm512_dpbusd_epi32(s1, xv[k + 1], _mm512_set1_epi32(static_cast<int32_t>(load_u32(wb + 6 + 4 * k))));
      }
      __m512i s = _mm512_add_epi32(s0, s1);
      s = _mm512_sub_epi32(s, _mm512_permutexvar_epi32(k15, s));
      const __m512 dw = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<int16_t>(load_u16(wb))));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx), acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) _mm512_storeu_ps(out + i * kLanes, acc[i]);
}

}  // namespace

void strided_avx512vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                        float* out) {
  strided(base, stride, n_rows, x, n, out);
}

void lanes_avx512vnni(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  switch (n_rows) {
    case 8: return lanes_r<8>(rows, x, n, out);
    case 7: return lanes_r<7>(rows, x, n, out);
    case 6: return lanes_r<6>(rows, x, n, out);
    case 5: return lanes_r<5>(rows, x, n, out);
    case 4: return lanes_r<4>(rows, x, n, out);
    case 3: return lanes_r<3>(rows, x, n, out);
    case 2: return lanes_r<2>(rows, x, n, out);
    default: return lanes_r<1>(rows, x, n, out);
  }
}

}  // namespace vlkv::quant::q8lanes
VLKV_TARGET_END
