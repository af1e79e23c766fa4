// Q4_1: blocks of 32 weights with an f16 scale d and f16 offset m, 4-bit codes.
// Layout (20 bytes): d | m | qs[16]; weight j is the low nibble of qs[j], weight j+16 its
// high nibble; w = code * d + m.
#include "quant/block_layouts.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = Q4_1Layout::kBlockElems;
constexpr size_t kBytes = Q4_1Layout::kBlockBytes;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const float m = load_half(p + 2);
    const uint8_t* qs = p + 4;
    for (int j = 0; j < kQk / 2; ++j) {
      dst[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      dst[j + kQk / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// ggml's quantize_row_q4_1_ref: [min, max] split into 15 steps.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    float min, max;
    min_max(src, kQk, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    store_half(p + 2, min);
    for (int j = 0; j < kQk / 2; ++j) {
      const float x0 = (src[j] - min) * id;
      const float x1 = (src[j + kQk / 2] - min) * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 0.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 0.5f)));
      p[4 + j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

const FormatKernels& kernels() {
  return block_format_table<dequantize_ref, kQk, kBytes>(VLKV_X86(&kQ4_1Avx2), VLKV_X86(&kQ4_1Avx512),
                                                         VLKV_X86(&kQ4_1Avx512Vnni), VLKV_ARM(&kQ4_1Neon),
                                                         VLKV_ARM(&kQ4_1Dotprod));
}

}  // namespace

constinit const WeightFormat kQ4_1Format = block_format<kernels>(GgmlType::kQ4_1, "q4_1", kQk, kBytes,
                                                                dequantize_ref, quantize_ref);

}  // namespace vlkv::quant
