// Q4_0: blocks of 32 weights, one f16 scale d and 16 bytes of 4-bit codes.
// Layout (18 bytes): d | qs[16]; weight j is low nibble of qs[j], weight j+16 its high
// nibble; w = (code - 8) * d.
#include "quant/block_layouts.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = Q4_0Layout::kBlockElems;
constexpr size_t kBytes = Q4_0Layout::kBlockBytes;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const uint8_t* qs = p + 2;
    for (int j = 0; j < kQk / 2; ++j) {
      const int x0 = (qs[j] & 0x0F) - 8;
      const int x1 = (qs[j] >> 4) - 8;
      dst[j] = static_cast<float>(x0) * d;
      dst[j + kQk / 2] = static_cast<float>(x1) * d;
    }
  }
}

// ggml's quantize_row_q4_0_ref: the signed value of largest magnitude maps to -8.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    const float max = signed_absmax(src, kQk);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    for (int j = 0; j < kQk / 2; ++j) {
      const float x0 = src[j] * id;
      const float x1 = src[j + kQk / 2] * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      p[2 + j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

const FormatKernels& kernels() {
  return block_format_table<dequantize_ref, kQk, kBytes>(VLKV_X86(&kQ4_0Avx2), VLKV_X86(&kQ4_0Avx512),
                                                         VLKV_X86(&kQ4_0Avx512Vnni), VLKV_ARM(&kQ4_0Neon),
                                                         VLKV_ARM(&kQ4_0Dotprod));
}

}  // namespace

constinit const WeightFormat kQ4_0Format = block_format<kernels>(GgmlType::kQ4_0, "q4_0", kQk, kBytes,
                                                                dequantize_ref, quantize_ref);

}  // namespace vlkv::quant
