// x86 SIMD helpers of the integer codecs' rows layout (int_pack.h): one packed unit of 16
// codes -> 16 bytes in code order, and f16 metadata -> floats with F16C. Included inside an
// AVX2-or-higher target region of an ISA file (base/simd_dispatch.h), after <immintrin.h>,
// <cstdint> and <cstring>; unnamed namespace: each ISA file keeps its own copy.
#pragma once

namespace vlkv::intq {
namespace {

// One full unit of 16 codes -> 16 bytes in code order.
template <int B>
inline __m128i unpack16(const uint8_t* p) {
  if constexpr (B == 8) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else if constexpr (B == 4) {
    const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i m = _mm_set1_epi8(15);
    return _mm_unpacklo_epi64(_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16(x, 4), m));
  } else {
    int32_t w;
    std::memcpy(&w, p, 4);
    // dword m = the 4 bytes shifted right by 2m: byte 4m + j = code j + 4m.
    __m128i c = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(w), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    if constexpr (B == 3) {
      uint16_t h;
      std::memcpy(&h, p + 4, 2);
      const __m128i bits = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
      const __m128i hb = _mm_shuffle_epi8(_mm_set1_epi16(static_cast<int16_t>(h)),
                                          _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
      const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(hb, bits), bits);
      c = _mm_or_si128(c, _mm_and_si128(set, _mm_set1_epi8(4)));
    }
    return c;
  }
}

// h: [d] f16 values (unaligned, d % 8 == 0) -> out[d] floats.
inline void halves_to_floats_f16c(const uint8_t* h, int d, float* out) {
  for (int i = 0; i < d; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 2 * i))));
}

}  // namespace
}  // namespace vlkv::intq
