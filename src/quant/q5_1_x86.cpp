// Q5_1's x86 kernels (q5_1.cpp has the layout and the reference): its block decoder for the
// AVX2 / AVX-512 loops of simd_blocks_x86.h and the 8-bit dots of q8_dot_x86.h.
#include "quant/block_layouts.h"
#include "quant/q8_dot_x86.h"

namespace vlkv::quant {
namespace {

struct Traits : Q5_1Layout {
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    g->q = _mm256_or_si256(nibbles_lo_hi(p + 8), bits_to_0x10(load_u32(p + 4)));
    g->s0 = g->s1 = half_f16c(p);
    g->b0 = g->b1 = half_f16c(p + 2);
  }
};

}  // namespace

const FormatKernels kQ5_1Avx2 = avx2_variant<Traits>();
const FormatKernels kQ5_1Avx512 = avx512_variant<Traits, false>();
const FormatKernels kQ5_1Avx512Vnni = avx512_variant<Traits, true>();

}  // namespace vlkv::quant
