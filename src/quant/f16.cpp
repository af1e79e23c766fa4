// F16: IEEE half per weight (block of 1). Conversions are exact one way (f16 -> f32)
// and round to nearest even the other, as ggml's.
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = load_half(p + 2 * i);
}
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) store_half(p + 2 * i, src[i]);
}

const FormatKernels kScalar = {dequantize_ref, dot_scalar<dequantize_ref, 1, 2>};

const FormatKernels& kernels() {
  static const SimdTable<FormatKernels> table(format_variants(&kScalar, VLKV_X86(&kF16Avx2), VLKV_X86(&kF16Avx512),
                                                              nullptr, VLKV_ARM(&kF16Neon), nullptr));
  return table.get();
}

}  // namespace

const WeightFormat kF16Format = {GgmlType::kF16, "f16", 1, 2, dequantize_ref, quantize_ref,
                                 Dispatched<kernels>::dequantize, Dispatched<kernels>::dot, nullptr,
                                 nullptr, nullptr, kernels};

}  // namespace vlkv::quant
