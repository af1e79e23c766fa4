// The block layouts of ggml's 32-element formats with one scale per block, stated once for
// the reference code (<type>.cpp) and the SIMD block decoders (<type>_x86.cpp, <type>_arm.cpp,
// whose Traits derive from them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vlkv::quant {

template <size_t Bytes, bool Bias>
struct Block32Layout {
  static constexpr int64_t kBlockElems = 32;
  static constexpr size_t kBlockBytes = Bytes;
  static constexpr int kGroups = 1;  // one scale (and, with kBias, one minimum) per block
  static constexpr bool kBias = Bias;
};

using Q4_0Layout = Block32Layout<18, false>;  // f16 d, 16 bytes of nibbles
using Q4_1Layout = Block32Layout<20, true>;   // f16 d, f16 m, nibbles
using Q5_0Layout = Block32Layout<22, false>;  // f16 d, 4 bytes of fifth bits, nibbles
using Q5_1Layout = Block32Layout<24, true>;   // f16 d, f16 m, fifth bits, nibbles
using Q8_0Layout = Block32Layout<34, false>;  // f16 d, 32 int8

// The K-quant super-blocks: 256 weights in 8 sub-blocks of 32, each with its own scale.
template <size_t Bytes, bool Bias>
struct SuperBlock256Layout {
  static constexpr int64_t kBlockElems = 256;
  static constexpr size_t kBlockBytes = Bytes;
  static constexpr int kGroups = 8;
  static constexpr bool kBias = Bias;
};

using Q4_KLayout = SuperBlock256Layout<144, true>;   // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, nibbles
using Q5_KLayout = SuperBlock256Layout<176, true>;   // as Q4_K plus 32 bytes of fifth bits
using Q6_KLayout = SuperBlock256Layout<210, false>;  // low nibbles, high 2 bits, int8 scales, f16 d

}  // namespace vlkv::quant
