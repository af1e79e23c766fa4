// The x86 kernels of Q4_0, Q4_1, Q5_0, Q5_1 (legacy_blocks.cpp has the references): one
// block decoder for the AVX2 / AVX-512 loops of simd_blocks_x86.h and the 8-bit dots of
// q8_dot_x86.h, and for the 4-bit formats the AVX-512 tables.
#include <type_traits>

#include "quant/block_layouts.h"
#include "quant/q8_dot_x86.h"

namespace vlkv::quant {
namespace {

template <class L>
struct Traits : L {
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    __m256i codes;
    if constexpr (L::kBits == 5) codes = _mm256_or_si256(nibbles_lo_hi(p + L::kQsOffset), bits_to_0x10(load_u32(p + L::kQhOffset)));
    else codes = nibbles_lo_hi(p + L::kQsOffset);
    g->q = L::kBias ? codes : _mm256_sub_epi8(codes, _mm256_set1_epi8(L::kZero));
    g->s0 = g->s1 = half_f16c(p);
    g->b0 = g->b1 = L::kBias ? half_f16c(p + 2) : 0.0f;
  }
};

// The 4-bit formats add the 16-entry tables of simd_blocks_x86.h's AVX-512 LUT loops.
template <class L>
struct LutTraits : Traits<L> {
  static constexpr int kChunkBytes = 16;
  static constexpr int kChunks = 1;
  VLKV_TARGET_AVX512 static void make_luts(const uint8_t* p, __m512* luts) {
    // The reference's products: code * d + m with one rounding (code * d is exact), or
    // (code - kZero) * d (code - kZero is exact in f32).
    if constexpr (L::kBias) {
      luts[0] = luts[1] = _mm512_fmadd_ps(iota16_ps(), _mm512_set1_ps(half_f16c(p)), _mm512_set1_ps(half_f16c(p + 2)));
    } else {
      const __m512 zero = _mm512_set1_ps(float{L::kZero});
      luts[0] = luts[1] = _mm512_mul_ps(_mm512_sub_ps(iota16_ps(), zero), _mm512_set1_ps(half_f16c(p)));
    }
  }
};

template <class L>
using X86Traits = std::conditional_t<L::kBits == 4, LutTraits<L>, Traits<L>>;

}  // namespace

#define VLKV_LEGACY_X86(F, L)                                                 \
  const FormatKernels F##Avx2 = avx2_variant<X86Traits<L>>();                    \
  const FormatKernels F##Avx512 = avx512_variant<X86Traits<L>, false>();         \
  const FormatKernels F##Avx512Vnni = avx512_variant<X86Traits<L>, true>();
VLKV_LEGACY_X86(kQ4_0, Q4_0Layout)
VLKV_LEGACY_X86(kQ4_1, Q4_1Layout)
VLKV_LEGACY_X86(kQ5_0, Q5_0Layout)
VLKV_LEGACY_X86(kQ5_1, Q5_1Layout)
#undef VLKV_LEGACY_X86

}  // namespace vlkv::quant
