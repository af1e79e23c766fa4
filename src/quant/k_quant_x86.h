// The x86 tiers of a K-quant (q4_k_x86.cpp, q5_k_x86.cpp, q6_k_x86.cpp, each with its block
// decoder T): the f32 loops of simd_blocks_x86.h on T, and the 8-bit dots of format F at
// every tier: the strided kernels of k_strided.h (prefill's block steps) and the
// packed-layout matvec of k_packed.h with the same steps. AVX-512 without VNNI keeps AVX2's
// 8-bit dots.
#pragma once

#include "quant/k_strided.h"
#include "quant/q8_dot_x86.h"

namespace vlkv::quant {

template <class T, kstrided::KFormat F>
struct KQuantX86 {
  static constexpr FormatKernels kAvx2 = with_packed8<kstrided::packed8_avx2<F>>(
      with_strided_q8<kstrided::strided_avx2<F>>(avx2_variant<T>()));
  static constexpr FormatKernels kAvx2Vnni = with_packed8<kstrided::packed8_avx2vnni<F>>(
      with_strided_q8<kstrided::strided_avx2vnni<F>>(avx2_variant<T>()));
  static constexpr FormatKernels kAvx512 = with_packed8<kstrided::packed8_avx2<F>>(
      with_strided_q8<kstrided::strided_avx2<F>>(avx512_variant<T, false>()));
  static constexpr FormatKernels kAvx512Vnni = with_packed8<kstrided::packed8_avx512vnni<F>>(
      with_strided_q8<kstrided::strided_avx512vnni<F>>(avx512_variant<T, true>()));
};

}  // namespace vlkv::quant
