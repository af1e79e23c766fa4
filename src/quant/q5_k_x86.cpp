// Q5_K's x86 kernels (q5_k.cpp has the layout and the reference): its block decoder for the
// AVX2 / AVX-512 f32 loops of simd_blocks_x86.h; the 8-bit dots are k_strided.h's.
#include "quant/block_layouts.h"
#include "quant/k_strided.h"
#include "quant/q8_dot_x86.h"

namespace vlkv::quant {
namespace {

struct Traits : Q5_KLayout {
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    const float d = half_f16c(p), dmin = half_f16c(p + 2);
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, p + 4, &sc, &m);
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 48 + 32 * (j / 2)));
      const __m256i lo = _mm256_and_si256(j % 2 == 0 ? v : _mm256_srli_epi16(v, 4), m4);
      const __m256i hbit = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one);
      g[j].q = _mm256_or_si256(lo, _mm256_slli_epi16(hbit, 4));
      g[j].s0 = g[j].s1 = d * sc;
      g[j].b0 = g[j].b1 = -(dmin * m);
    }
  }
};

}  // namespace

// The 8-bit dots: the strided kernels of k_strided.h (prefill's block steps) at every tier, and
// the packed-layout matvec of k_packed.h with the same steps.
constexpr auto kFmt = kstrided::KFormat::kQ5_K;
const FormatKernels kQ5_KAvx2 = with_packed8<kstrided::packed8_avx2<kFmt>>(with_strided_q8<kstrided::strided_avx2<kFmt>>(avx2_variant<Traits>()));
const FormatKernels kQ5_KAvx2Vnni = with_packed8<kstrided::packed8_avx2vnni<kFmt>>(with_strided_q8<kstrided::strided_avx2vnni<kFmt>>(avx2_variant<Traits>()));
const FormatKernels kQ5_KAvx512 = with_packed8<kstrided::packed8_avx2<kFmt>>(with_strided_q8<kstrided::strided_avx2<kFmt>>(avx512_variant<Traits, false>()));
const FormatKernels kQ5_KAvx512Vnni = with_packed8<kstrided::packed8_avx512vnni<kFmt>>(with_strided_q8<kstrided::strided_avx512vnni<kFmt>>(avx512_variant<Traits, true>()));

}  // namespace vlkv::quant
