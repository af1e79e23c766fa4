// Q5_1: blocks of 32 weights with f16 scale d and f16 offset m, 5-bit codes. Layout
// (24 bytes): d | m | qh[4] | qs[16]; nibbles as in Q4_1, bit j of qh (little-endian u32)
// is bit 4 of weight j; w = code * d + m.
#include "quant/block_layouts.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = Q5_1Layout::kBlockElems;
constexpr size_t kBytes = Q5_1Layout::kBlockBytes;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const float m = load_half(p + 2);
    const uint32_t qh = load_u32(p + 4);
    const uint8_t* qs = p + 8;
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      dst[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
      dst[j + kQk / 2] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
    }
  }
}

// ggml's quantize_row_q5_1_ref: [min, max] split into 31 steps.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    float min, max;
    min_max(src, kQk, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    store_half(p + 2, min);
    uint32_t qh = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      const float x0 = (src[j] - min) * id;
      const float x1 = (src[j + kQk / 2] - min) * id;
      const uint32_t xi0 = static_cast<uint8_t>(x0 + 0.5f);
      const uint32_t xi1 = static_cast<uint8_t>(x1 + 0.5f);
      p[8 + j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + kQk / 2);
    }
    std::memcpy(p + 4, &qh, 4);
  }
}

const FormatKernels& kernels() {
  return block_format_table<dequantize_ref, kQk, kBytes>(VLKV_X86(&kQ5_1Avx2), VLKV_X86(&kQ5_1Avx512),
                                                         VLKV_X86(&kQ5_1Avx512Vnni), VLKV_ARM(&kQ5_1Neon),
                                                         VLKV_ARM(&kQ5_1Dotprod));
}

}  // namespace

constinit const WeightFormat kQ5_1Format = block_format<kernels>(GgmlType::kQ5_1, "q5_1", kQk, kBytes,
                                                                dequantize_ref, quantize_ref);

}  // namespace vlkv::quant
