// Q6_K's x86 kernels (q6_k.cpp has the layout and the reference): its block decoder for the
// AVX2 / AVX-512 f32 loops of simd_blocks_x86.h; the 8-bit dots are k_strided.h's
// and k_packed.h's (k_quant_x86.h).
#include "quant/block_layouts.h"
#include "quant/k_quant_x86.h"

namespace vlkv::quant {
namespace {

struct Traits : Q6_KLayout {
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    const float d = half_f16c(p + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {  // j = 4 * half + quarter
      const int half = j / 4, k = j % 4;
      const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * half + 32 * (k & 1)));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * half));
      const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
      const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), m2);
      g[j].q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), off);
      g[j].s0 = d * static_cast<float>(sc[2 * j]);
      g[j].s1 = d * static_cast<float>(sc[2 * j + 1]);
      g[j].b0 = g[j].b1 = 0.0f;
    }
  }
};

using Tiers = KQuantX86<Traits, kstrided::KFormat::kQ6_K>;

}  // namespace

const FormatKernels kQ6_KAvx2 = Tiers::kAvx2, kQ6_KAvx2Vnni = Tiers::kAvx2Vnni, kQ6_KAvx512 = Tiers::kAvx512,
                    kQ6_KAvx512Vnni = Tiers::kAvx512Vnni;

}  // namespace vlkv::quant
