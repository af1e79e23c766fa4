// The block layouts of ggml's 32-element formats with one scale per block, stated once for
// the reference code (legacy_blocks.cpp, q8_0.cpp) and the SIMD block decoders (<file>_x86.cpp,
// <file>_arm.cpp, whose Traits derive from them).
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

// ggml's four "legacy" formats: 4- or 5-bit codes, an f16 scale d, with Bias an f16 offset m
// (w = code * d + m), else a fixed zero code (w = (code - kZero) * d). Fields in this order:
// d | m (Bias) | qh[4] (5 bits: bit j of the little-endian u32 is bit 4 of weight j) | qs[16]
// (weight j is the low nibble of qs[j], weight j + 16 its high nibble).
template <int Bits, bool Bias>
struct LegacyBlockLayout : Block32Layout<2 + (Bias ? 2 : 0) + (Bits == 5 ? 4 : 0) + 16, Bias> {
  static constexpr int kBits = Bits;
  static constexpr int kZero = Bias ? 0 : 1 << (Bits - 1);  // the code of 0 without an offset
  static constexpr size_t kQhOffset = Bias ? 4 : 2;
  static constexpr size_t kQsOffset = kQhOffset + (Bits == 5 ? 4 : 0);
};

using Q4_0Layout = LegacyBlockLayout<4, false>;  // 18 bytes
using Q4_1Layout = LegacyBlockLayout<4, true>;   // 20 bytes
using Q5_0Layout = LegacyBlockLayout<5, false>;  // 22 bytes
using Q5_1Layout = LegacyBlockLayout<5, true>;   // 24 bytes
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
