// BF16: bfloat16 per weight (block of 1): the top 16 bits of an f32. Widening is exact;
// narrowing rounds to nearest even (NaN stays quiet), as ggml's.
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(p + 2 * i));
}
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = fp32_to_bf16(src[i]);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

const FormatKernels kScalar = {dequantize_ref, dot_scalar<dequantize_ref, 1, 2>};

const FormatKernels& kernels() {
  static const SimdTable<FormatKernels> table(format_variants(&kScalar, VLKV_X86(&kBf16Avx2), VLKV_X86(&kBf16Avx512),
                                                              nullptr, VLKV_ARM(&kBf16Neon), nullptr));
  return table.get();
}

}  // namespace

const WeightFormat kBf16Format = {GgmlType::kBF16, "bf16", 1, 2, dequantize_ref, quantize_ref,
                                 Dispatched<kernels>::dequantize, Dispatched<kernels>::dot, nullptr,
                                 nullptr, nullptr, kernels};

}  // namespace vlkv::quant
