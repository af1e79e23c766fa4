// AVX-512 VNNI + VBMI kernels of the ternary codec's tiled blocks (layout: ternary_tiles.h):
// decode 64 bytes per digit by two vpermi2b table lookups and a blend, accumulate by
// vpdpbusd of the 15-bit probabilities (hi * 128 + lo) against the codes in place.
#include <immintrin.h>

#include "base/simd_dispatch.h"
#include "kv/methods/vidkv/ternary_tiles.h"

// GCC 12's AVX-512 headers seed many intrinsics with _mm512_undefined_*(), which trips
// -W(maybe-)uninitialized once inlined; the values are fully defined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace vlkv::ternt {

#define VLKV_TT_VNNI VLKV_TARGET(VLKV_ISA_AVX512_VBMI)

VLKV_TT_VNNI void decode_tiles_avx512vbmi(const uint8_t* trits, const TritOrder& o, int8_t* codes) {
  const auto& T = digit_tables().digit;
  for (int ch = 0; ch < o.n_full; ++ch) {
    const __m512i b = _mm512_loadu_si512(trits + 64 * ch);
    const __mmask64 high = _mm512_movepi8_mask(b);  // bytes >= 128 read the upper half table
    for (int g = 0; g < 5; ++g) {
      const __m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512(T[g]), b, _mm512_load_si512(T[g] + 64));
      const __m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512(T[g] + 128), b, _mm512_load_si512(T[g] + 192));
      _mm512_storeu_si512(codes + 64 * (5 * ch + g), _mm512_mask_blend_epi8(high, lo, hi));
    }
  }
  decode_tail(trits, o, codes);
}

namespace {

// Channels 16 u0 .. 16 (u0 + U) of accum_tiles: 2U independent vpdpbusd chains (one chain
// per unit would wait on the instruction's latency).
template <int U>
VLKV_TT_VNNI inline void accum_units(const int8_t* codes, int nj, int u0, const uint8_t* hb, const uint8_t* lb,
                                     __m512 step, const float* sig, float* out) {
  __m512i ah[U], al[U];
  for (int i = 0; i < U; ++i) ah[i] = al[i] = _mm512_setzero_si512();
  for (int j = 0; j < nj; ++j) {
    const __m512i bh = _mm512_set1_epi32(load_i32(hb + 4 * j)), bl = _mm512_set1_epi32(load_i32(lb + 4 * j));
    for (int i = 0; i < U; ++i) {
      const __m512i v = _mm512_loadu_si512(codes + 64 * (static_cast<int64_t>(u0 + i) * nj + j));
      ah[i] = _mm512_dpbusd_epi32(ah[i], bh, v);
      al[i] = _mm512_dpbusd_epi32(al[i], bl, v);
    }
  }
  for (int i = 0; i < U; ++i) {
    const int c = 16 * (u0 + i);
    const __m512 dot = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ah[i]), _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(al[i]));
    const __m512 w = _mm512_mul_ps(_mm512_loadu_ps(sig + c), step);
    _mm512_storeu_ps(out + c, _mm512_fmadd_ps(dot, w, _mm512_loadu_ps(out + c)));
  }
}

}  // namespace

VLKV_TT_VNNI bool accum_tiles_avx512vnni(const float* p, const int8_t* codes, const TritOrder& o, const float* sig,
                                     float* out) {
  const int G = o.G, nj = G / 4;
  __m512 mx = _mm512_setzero_ps(), mn = mx;
  __mmask16 nan = 0;  // max/min may drop a NaN
  for (int t = 0; t < G; t += 16) {
    const __mmask16 m = G - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (G - t)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, p + t);
    mx = _mm512_max_ps(mx, x);
    mn = _mm512_min_ps(mn, x);
    nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  }
  // Horizontal max / min by lane shuffles.
  mx = _mm512_max_ps(mx, _mm512_shuffle_f32x4(mx, mx, 0x4e));
  mn = _mm512_min_ps(mn, _mm512_shuffle_f32x4(mn, mn, 0x4e));
  mx = _mm512_max_ps(mx, _mm512_shuffle_f32x4(mx, mx, 0xb1));
  mn = _mm512_min_ps(mn, _mm512_shuffle_f32x4(mn, mn, 0xb1));
  mx = _mm512_max_ps(mx, _mm512_permute_ps(mx, 0x4e));
  mn = _mm512_min_ps(mn, _mm512_permute_ps(mn, 0x4e));
  mx = _mm512_max_ps(mx, _mm512_permute_ps(mx, 0xb1));
  mn = _mm512_min_ps(mn, _mm512_permute_ps(mn, 0xb1));
  const float pmax = _mm512_cvtss_f32(mx);
  if (nan != 0 || _mm512_cvtss_f32(mn) < 0.0f) return false;  // the float path propagates NaN
  if (pmax < intt::kMinRoundedMax) return true;  // every p ~0: 32767 / pmax would overflow (intt::inverse_step)
  if (!(pmax <= 3.4e38f)) return false;                        // inf
  alignas(64) uint8_t hb[256], lb[256];  // [G] high and low 7+8 bits of the rounded p
  const __m512 inv = _mm512_set1_ps(32767.0f / pmax);
  for (int t = 0; t < G; t += 16) {
    const __mmask16 m = G - t >= 16 ? __mmask16(0xffff) : __mmask16((1u << (G - t)) - 1);
    const __m512i pi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + t), inv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(hb + t), _mm512_cvtepi32_epi8(_mm512_srli_epi32(pi, 7)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lb + t), _mm512_cvtepi32_epi8(_mm512_and_si512(pi, _mm512_set1_epi32(127))));
  }
  const __m512 step = _mm512_set1_ps(pmax / 32767.0f);
  const int nu = o.d / 16;
  int u = 0;
  for (; u + 4 <= nu; u += 4) accum_units<4>(codes, nj, u, hb, lb, step, sig, out);
  for (; u < nu; ++u) accum_units<1>(codes, nj, u, hb, lb, step, sig, out);
  return true;
}

#undef VLKV_TT_VNNI

}  // namespace vlkv::ternt
