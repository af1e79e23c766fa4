// Q5_K's x86 kernels (scale_min_k.cpp has the layout and the reference): its block decoder for the
// AVX2 / AVX-512 f32 loops of simd_blocks_x86.h; the 8-bit dots are k_strided.h's
// and k_packed.h's (k_quant_x86.h).
#include "quant/block_layouts.h"
#include "quant/k_quant_x86.h"

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

using Tiers = KQuantX86<Traits, kstrided::KFormat::kQ5_K>;

}  // namespace

const FormatKernels kQ5_KAvx2 = Tiers::kAvx2, kQ5_KAvx2Vnni = Tiers::kAvx2Vnni, kQ5_KAvx512 = Tiers::kAvx512,
                    kQ5_KAvx512Vnni = Tiers::kAvx512Vnni;

}  // namespace vlkv::quant
