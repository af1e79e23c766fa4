// F32: plain little-endian floats (block of 1). Dequantize is a copy.
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

void dequantize_ref(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_ref(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

const FormatKernels kScalar = {dequantize_ref, dot_scalar<dequantize_ref, 1, 4>};

const FormatKernels& kernels() {
  static const SimdTable<FormatKernels> table(format_variants(&kScalar, VLKV_X86(&kF32Avx2), VLKV_X86(&kF32Avx512),
                                                              nullptr, VLKV_ARM(&kF32Neon), nullptr));
  return table.get();
}

}  // namespace

const WeightFormat kF32Format = {GgmlType::kF32, "f32", 1, 4, dequantize_ref, quantize_ref,
                                 dequantize_ref, Dispatched<kernels>::dot, nullptr, nullptr, nullptr, kernels};

}  // namespace vlkv::quant
