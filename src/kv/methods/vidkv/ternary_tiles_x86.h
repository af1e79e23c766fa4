// The AVX2-width ternary tile kernels as templates over the integer dot (internal to
// ternary_tiles_avx2.cpp and ternary_tiles_avxvnni.cpp, which include this file inside
// their VLKV_TARGET_BEGIN region; everything here has internal linkage, so each file's
// copy stays its own — base/simd_dispatch.h says why).
// Layout: ternary_tiles.h. Decode: the base-3 digits of 32 stored bytes at once by signed
// byte compares (no division, no table): digit g of b is (b >= 3^g) + (b >= 2 * 3^g) after
// the higher digits are subtracted. Accumulate: 15-bit probabilities (hi * 128 + lo)
// against the int8 codes through D::add (u8 p x s8 code, summed in D's accumulator) and
// D::finish (to s32 per channel): the same rounding and result as the AVX-512 kernel.
#pragma once

namespace vlkv::ternt {
namespace {

// The 5 codes of 32 bytes: codes_g[i] = digit g of b[i] - 1, written to out + 64 * g.
inline void decode32(__m256i b, int8_t* out) {
  __m256i x = _mm256_xor_si256(b, _mm256_set1_epi8(static_cast<char>(0x80)));  // b - 128 as s8 (b < 243)
  const __m256i ones = _mm256_set1_epi8(-1);
  int w = 81;
  for (int g = 4; g >= 1; --g, w /= 3) {
    const __m256i c1 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(static_cast<char>(w - 1 - 128)));      // -1 iff b >= w
    const __m256i c2 = _mm256_cmpgt_epi8(x, _mm256_set1_epi8(static_cast<char>(2 * w - 1 - 128)));  // -1 iff b >= 2w
    // digit - 1 = -(c1 + c2) - 1 = ~(c1 + c2)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * g), _mm256_xor_si256(_mm256_add_epi8(c1, c2), ones));
    const __m256i wv = _mm256_set1_epi8(static_cast<char>(w));
    x = _mm256_sub_epi8(_mm256_sub_epi8(x, _mm256_and_si256(c1, wv)), _mm256_and_si256(c2, wv));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi8(x, _mm256_set1_epi8(127)));  // b0 - 1
}

// p of one block rounded to 15 bits: hb, lb [G] (high 8 and low 7 bits); pmax, false when
// some p < 0 or is NaN (the float path handles those). G % 4 == 0, G <= 256.
inline bool round_p15(const float* p, int G, uint8_t* hb, uint8_t* lb, float* pmax_out) {
  __m256 mx = _mm256_setzero_ps(), mn = mx, nan = mx;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  auto load = [&](int t) {
    if (G - t >= 8) return _mm256_loadu_ps(p + t);
    return _mm256_maskload_ps(p + t, _mm256_cmpgt_epi32(_mm256_set1_epi32(G - t), lane));
  };
  for (int t = 0; t < G; t += 8) {
    const __m256 x = load(t);
    mx = _mm256_max_ps(mx, x);
    mn = _mm256_min_ps(mn, x);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // max/min may drop a NaN
  }
  if (_mm256_movemask_ps(nan) != 0) return false;
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  __m128 n4 = _mm_min_ps(_mm256_castps256_ps128(mn), _mm256_extractf128_ps(mn, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  n4 = _mm_min_ps(n4, _mm_movehl_ps(n4, n4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  n4 = _mm_min_ss(n4, _mm_shuffle_ps(n4, n4, 1));
  const float pmax = _mm_cvtss_f32(m4);
  if (_mm_cvtss_f32(n4) < 0.0f) return false;
  if (!(pmax <= 3.4e38f)) return false;  // inf: the float path propagates it
  *pmax_out = pmax;
  if (pmax < intt::kMinRoundedMax) return true;  // every p ~0: 32767 / pmax would overflow (intt::inverse_step)
  const __m256 inv = _mm256_set1_ps(32767.0f / pmax);
  const __m256i lo7 = _mm256_set1_epi32(127);
  // Bytes of each dword lane to the low 4 bytes of each 128-bit half.
  const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  for (int t = 0; t < G; t += 8) {
    const __m256i pi = _mm256_cvtps_epi32(_mm256_mul_ps(load(t), inv));  // [0, 32767]
    const __m256i h = _mm256_shuffle_epi8(_mm256_srli_epi32(pi, 7), pick);
    const __m256i l = _mm256_shuffle_epi8(_mm256_and_si256(pi, lo7), pick);
    const uint32_t h0 = static_cast<uint32_t>(_mm256_extract_epi32(h, 0)), h1 = static_cast<uint32_t>(_mm256_extract_epi32(h, 4));
    const uint32_t l0 = static_cast<uint32_t>(_mm256_extract_epi32(l, 0)), l1 = static_cast<uint32_t>(_mm256_extract_epi32(l, 4));
    std::memcpy(hb + t, &h0, 4);
    std::memcpy(lb + t, &l0, 4);
    if (G - t > 4) {  // G % 4 == 0: a tail of 4 stores only the first word
      std::memcpy(hb + t + 4, &h1, 4);
      std::memcpy(lb + t + 4, &l1, 4);
    }
  }
  return true;
}

// Channels 16 u0 .. 16 (u0 + U): 4 U independent accumulator chains.
template <int U, class D>
inline void accum_units(const int8_t* codes, int nj, int u0, const uint8_t* hb, const uint8_t* lb,
                                        __m256 step, const float* sig, float* out) {
  __m256i ah[2 * U], al[2 * U];  // [unit][half] (half 0: channels 0-7 of the unit)
  for (int i = 0; i < 2 * U; ++i) ah[i] = al[i] = _mm256_setzero_si256();
  for (int j = 0; j < nj; ++j) {
    const __m256i bh = _mm256_set1_epi32(load_i32(hb + 4 * j)), bl = _mm256_set1_epi32(load_i32(lb + 4 * j));
    for (int i = 0; i < U; ++i) {
      const int8_t* c = codes + 64 * (static_cast<int64_t>(u0 + i) * nj + j);
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
      const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32));
      ah[2 * i] = D::add(ah[2 * i], bh, v0);
      ah[2 * i + 1] = D::add(ah[2 * i + 1], bh, v1);
      al[2 * i] = D::add(al[2 * i], bl, v0);
      al[2 * i + 1] = D::add(al[2 * i + 1], bl, v1);
    }
  }
  for (int i = 0; i < 2 * U; ++i) {
    const int c = 16 * u0 + 8 * i;  // units are 16 channels: half i % 2 of unit i / 2
    const __m256 dot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(D::finish(ah[i])), _mm256_set1_ps(128.0f),
                                       _mm256_cvtepi32_ps(D::finish(al[i])));
    const __m256 w = _mm256_mul_ps(_mm256_loadu_ps(sig + c), step);
    _mm256_storeu_ps(out + c, _mm256_fmadd_ps(dot, w, _mm256_loadu_ps(out + c)));
  }
}

template <class D>
inline bool accum_tiles_impl(const float* p, const int8_t* codes, const TritOrder& o, const float* sig,
                                             float* out) {
  alignas(32) uint8_t hb[256], lb[256];  // [G]
  float pmax = 0.0f;
  if (!round_p15(p, o.G, hb, lb, &pmax)) return false;
  if (pmax == 0.0f) return true;  // every p is 0
  const __m256 step = _mm256_set1_ps(pmax / 32767.0f);
  const int nu = o.d / 16, nj = o.G / 4;
  int u = 0;
  for (; u + 2 <= nu; u += 2) accum_units<2, D>(codes, nj, u, hb, lb, step, sig, out);
  for (; u < nu; ++u) accum_units<1, D>(codes, nj, u, hb, lb, step, sig, out);
  return true;
}

}  // namespace
}  // namespace vlkv::ternt
