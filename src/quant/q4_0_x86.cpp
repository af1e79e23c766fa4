// Q4_0's x86 kernels (q4_0.cpp has the layout and the reference): its block decoder for the
// AVX2 / AVX-512 loops of simd_blocks_x86.h and the 8-bit dots of q8_dot_x86.h.
#include "quant/block_layouts.h"
#include "quant/q8_dot_x86.h"

namespace vlkv::quant {
namespace {

struct Traits : Q4_0Layout {
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    g->q = _mm256_sub_epi8(nibbles_lo_hi(p + 2), _mm256_set1_epi8(8));
    g->s0 = g->s1 = half_f16c(p);
    g->b0 = g->b1 = 0.0f;
  }
  static constexpr size_t kQsOffset = 2;
  static constexpr int kChunkBytes = 16;
  static constexpr int kChunks = 1;
  VLKV_TARGET_AVX512 static void make_luts(const uint8_t* p, __m512* luts) {
    // (code - 8) * d, the reference's product (code - 8 is exact in f32).
    luts[0] = luts[1] = _mm512_mul_ps(_mm512_sub_ps(iota16_ps(), _mm512_set1_ps(8.0f)), _mm512_set1_ps(half_f16c(p)));
  }
};

}  // namespace

const FormatKernels kQ4_0Avx2 = avx2_variant<Traits>();
const FormatKernels kQ4_0Avx512 = avx512_variant<Traits, false>();
const FormatKernels kQ4_0Avx512Vnni = avx512_variant<Traits, true>();

}  // namespace vlkv::quant
