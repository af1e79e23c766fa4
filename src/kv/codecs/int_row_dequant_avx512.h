// AVX-512 dequantization of one rows-layout token (IntRowKernels::dequantize): 16 codes per
// FMA. Shared by the AVX-512 and AVX-512 VNNI variants: included inside their target regions
// after int_unpack_x86.h; unnamed namespace, so each file keeps its own copy.
#pragma once

namespace vlkv::intk {
namespace {

template <int B>
void dequantize_avx512(const IntRowMeta& m, int d, float* out) {
  for (int u = 0; u < d; u += 16) {
    // maskz forms: GCC 12's plain _mm512_cvtepu8_epi32 / _mm512_cvtepi32_ps trip
    // -Wuninitialized inside its own headers.
    const __m512 c = _mm512_maskz_cvtepi32_ps(
        0xffff, _mm512_maskz_cvtepu8_epi32(0xffff, intq::unpack16<B>(m.codes + u * B / 8)));
    __m512 s, z;
    if (m.scale_c) {
      s = _mm512_loadu_ps(m.scale_c + u);
      z = _mm512_loadu_ps(m.min_c + u);
    } else {
      uint16_t sh, zh;
      std::memcpy(&sh, m.scale_h + 2 * (u / m.g), 2);
      std::memcpy(&zh, m.min_h + 2 * (u / m.g), 2);
      s = _mm512_set1_ps(_cvtsh_ss(sh));
      z = _mm512_set1_ps(_cvtsh_ss(zh));
    }
    _mm512_storeu_ps(out + u, _mm512_fmadd_ps(c, s, z));
  }
}

}  // namespace
}  // namespace vlkv::intk
