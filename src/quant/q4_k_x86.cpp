// Q4_K's x86 kernels (scale_min_k.cpp has the layout and the reference): its block decoder for the
// AVX2 / AVX-512 f32 loops of simd_blocks_x86.h; the 8-bit dots are k_strided.h's
// and k_packed.h's (k_quant_x86.h).
#include "quant/block_layouts.h"
#include "quant/k_quant_x86.h"

namespace vlkv::quant {
namespace {

struct Traits : Q4_KLayout {
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    const float d = half_f16c(p), dmin = half_f16c(p + 2);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, p + 4, &sc, &m);
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * (j / 2)));
      g[j].q = _mm256_and_si256(j % 2 == 0 ? v : _mm256_srli_epi16(v, 4), m4);
      g[j].s0 = g[j].s1 = d * sc;
      g[j].b0 = g[j].b1 = -(dmin * m);
    }
  }
  static constexpr size_t kQsOffset = 16;
  static constexpr int kChunkBytes = 32;
  static constexpr int kChunks = 4;
  VLKV_TARGET_AVX512 static void make_luts(const uint8_t* p, __m512* luts) {
    // (d * sc) * code - dmin * m with one rounding, as the reference (the product is exact).
    const float d = half_f16c(p), dmin = half_f16c(p + 2);
    const __m512 iota = iota16_ps();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, p + 4, &sc, &m);
      luts[j] = _mm512_fmadd_ps(iota, _mm512_set1_ps(d * sc), _mm512_set1_ps(-(dmin * m)));
    }
  }
};

using Tiers = KQuantX86<Traits, kstrided::KFormat::kQ4_K>;

}  // namespace

const FormatKernels kQ4_KAvx2 = Tiers::kAvx2, kQ4_KAvx2Vnni = Tiers::kAvx2Vnni, kQ4_KAvx512 = Tiers::kAvx512,
                    kQ4_KAvx512Vnni = Tiers::kAvx512Vnni;

}  // namespace vlkv::quant
