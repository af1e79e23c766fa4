// Q4_0, Q4_1, Q5_0, Q5_1: ggml's 32-weight blocks of 4- or 5-bit codes with an f16 scale d
// and, for Q4_1 / Q5_1, an f16 offset m (LegacyBlockLayout in block_layouts.h has the
// fields). The references here follow ggml's dequantize_row_* / quantize_row_*_ref
// expression for expression (one template, the format's differences as `if constexpr`), so
// each format's results are ggml's bits; legacy_blocks_x86.cpp and _arm.cpp hold the SIMD
// decoders.
#include "quant/block_layouts.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

// Weight j (< 16) is the low nibble of qs[j], weight j + 16 its high nibble; 5-bit formats
// take bit 4 of weight j from bit j of qh.
template <class L>
void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / 32; ++b, p += L::kBlockBytes, dst += 32) {
    const float d = load_half(p);
    [[maybe_unused]] const float m = L::kBias ? load_half(p + 2) : 0.0f;
    [[maybe_unused]] const uint32_t qh = L::kBits == 5 ? load_u32(p + L::kQhOffset) : 0;
    const uint8_t* qs = p + L::kQsOffset;
    for (int j = 0; j < 16; ++j) {
      int c0 = qs[j] & 0x0F, c1 = qs[j] >> 4;
      if constexpr (L::kBits == 5) {
        c0 |= static_cast<int>(((qh >> j) << 4) & 0x10);
        c1 |= static_cast<int>((qh >> (j + 12)) & 0x10);
      }
      if constexpr (L::kBias) {
        dst[j] = static_cast<float>(c0) * d + m;
        dst[j + 16] = static_cast<float>(c1) * d + m;
      } else {
        dst[j] = static_cast<float>(c0 - L::kZero) * d;
        dst[j + 16] = static_cast<float>(c1 - L::kZero) * d;
      }
    }
  }
}

// Symmetric formats: the signed value of largest magnitude maps to code 0 (-kZero * d);
// with an offset, [min, max] is split into 2^bits - 1 steps.
template <class L>
void quantize_ref(const float* src, void* dst, int64_t n) {
  constexpr int kMaxCode = (1 << L::kBits) - 1;
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, p += L::kBlockBytes, src += 32) {
    float d, min = 0.0f;
    if constexpr (L::kBias) {
      float max;
      min_max(src, 32, &min, &max);
      d = (max - min) / static_cast<float>(kMaxCode);
      store_half(p + 2, min);
    } else {
      d = signed_absmax(src, 32) / -static_cast<float>(L::kZero);
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    uint32_t qh = 0;
    for (int j = 0; j < 32; ++j) {
      int code;
      if constexpr (L::kBias && L::kBits == 5) {  // ggml's q5_1 rounds without the clamp
        code = static_cast<uint8_t>((src[j] - min) * id + 0.5f);
      } else if constexpr (L::kBias) {
        code = std::min(kMaxCode, static_cast<int>(static_cast<int8_t>((src[j] - min) * id + 0.5f)));
      } else {
        constexpr float kHalfUp = static_cast<float>(L::kZero) + 0.5f;
        code = std::min(kMaxCode, static_cast<int>(static_cast<int8_t>(src[j] * id + kHalfUp)));
      }
      uint8_t& byte = p[L::kQsOffset + j % 16];
      byte = static_cast<uint8_t>(j < 16 ? code & 0x0F : byte | ((code & 0x0F) << 4));
      if constexpr (L::kBits == 5) qh |= ((static_cast<uint32_t>(code) & 0x10u) >> 4) << j;
    }
    if constexpr (L::kBits == 5) std::memcpy(p + L::kQhOffset, &qh, 4);
  }
}

// The tier table of format L from the variants its SIMD files define.
template <class L, const FormatKernels* Avx2, const FormatKernels* Avx512, const FormatKernels* Avx512Vnni,
          const FormatKernels* Neon, const FormatKernels* Dotprod>
const FormatKernels& kernels() {
  return block_format_table<dequantize_ref<L>, 32, L::kBlockBytes>(Avx2, Avx512, Avx512Vnni, Neon, Dotprod);
}

template <class L, const FormatKernels& (*K)()>
constexpr WeightFormat legacy_format(GgmlType type, const char* name) {
  return block_format<K>(type, name, 32, L::kBlockBytes, dequantize_ref<L>, quantize_ref<L>);
}

}  // namespace

#define VLKV_LEGACY_VARIANTS(F) \
  VLKV_X86(&F##Avx2), VLKV_X86(&F##Avx512), VLKV_X86(&F##Avx512Vnni), VLKV_ARM(&F##Neon), VLKV_ARM(&F##Dotprod)
constinit const WeightFormat kQ4_0Format =
    legacy_format<Q4_0Layout, kernels<Q4_0Layout, VLKV_LEGACY_VARIANTS(kQ4_0)>>(GgmlType::kQ4_0, "q4_0");
constinit const WeightFormat kQ4_1Format =
    legacy_format<Q4_1Layout, kernels<Q4_1Layout, VLKV_LEGACY_VARIANTS(kQ4_1)>>(GgmlType::kQ4_1, "q4_1");
constinit const WeightFormat kQ5_0Format =
    legacy_format<Q5_0Layout, kernels<Q5_0Layout, VLKV_LEGACY_VARIANTS(kQ5_0)>>(GgmlType::kQ5_0, "q5_0");
constinit const WeightFormat kQ5_1Format =
    legacy_format<Q5_1Layout, kernels<Q5_1Layout, VLKV_LEGACY_VARIANTS(kQ5_1)>>(GgmlType::kQ5_1, "q5_1");
#undef VLKV_LEGACY_VARIANTS

}  // namespace vlkv::quant
