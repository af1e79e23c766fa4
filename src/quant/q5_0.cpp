// Q5_0: blocks of 32 weights, one f16 scale d, 5-bit codes split into nibbles and a
// 32-bit mask of fifth bits. Layout (22 bytes): d | qh[4] | qs[16]; weight j (j < 16) is
// the low nibble of qs[j], weight j+16 its high nibble; bit j of qh (little-endian u32) is
// bit 4 of weight j; w = (code - 16) * d.
#include "quant/block_layouts.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = Q5_0Layout::kBlockElems;
constexpr size_t kBytes = Q5_0Layout::kBlockBytes;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const uint32_t qh = load_u32(p + 2);
    const uint8_t* qs = p + 6;
    for (int j = 0; j < kQk / 2; ++j) {
      const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      const int x0 = ((qs[j] & 0x0F) | h0) - 16;
      const int x1 = ((qs[j] >> 4) | h1) - 16;
      dst[j] = static_cast<float>(x0) * d;
      dst[j + kQk / 2] = static_cast<float>(x1) * d;
    }
  }
}

// ggml's quantize_row_q5_0_ref: the signed value of largest magnitude maps to -16.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    const float max = signed_absmax(src, kQk);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    uint32_t qh = 0;
    for (int j = 0; j < kQk / 2; ++j) {
      const float x0 = src[j] * id;
      const float x1 = src[j + kQk / 2] * id;
      const int xi0 = std::min(31, static_cast<int>(static_cast<int8_t>(x0 + 16.5f)));
      const int xi1 = std::min(31, static_cast<int>(static_cast<int8_t>(x1 + 16.5f)));
      p[6 + j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((static_cast<uint32_t>(xi0) & 0x10u) >> 4) << j;
      qh |= ((static_cast<uint32_t>(xi1) & 0x10u) >> 4) << (j + kQk / 2);
    }
    std::memcpy(p + 2, &qh, 4);
  }
}

const FormatKernels& kernels() {
  return block_format_table<dequantize_ref, kQk, kBytes>(VLKV_X86(&kQ5_0Avx2), VLKV_X86(&kQ5_0Avx512),
                                                         VLKV_X86(&kQ5_0Avx512Vnni), VLKV_ARM(&kQ5_0Neon),
                                                         VLKV_ARM(&kQ5_0Dotprod));
}

}  // namespace

constinit const WeightFormat kQ5_0Format = block_format<kernels>(GgmlType::kQ5_0, "q5_0", kQk, kBytes,
                                                                dequantize_ref, quantize_ref);

}  // namespace vlkv::quant
