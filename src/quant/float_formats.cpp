// F32, F16, BF16: one float per weight (blocks of 1). Dequantizing f32 is a copy; f16 widens
// exactly and narrows to nearest even, as ggml's; bf16 is the top 16 bits of an f32 (exact
// widening; narrowing to nearest even, NaN kept quiet, as ggml's). The SIMD rows are in
// <type>_x86.cpp / <type>_arm.cpp.
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

void copy_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }
void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

float load_bf16(const uint8_t* p) { return bf16_to_fp32(load_u16(p)); }
void store_bf16(uint8_t* p, float f) {
  const uint16_t h = fp32_to_bf16(f);
  std::memcpy(p, &h, 2);
}

template <float (*Load)(const uint8_t*)>
void dequantize_halves(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Load(p + 2 * i);
}
template <void (*Store)(uint8_t*, float)>
void quantize_halves(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) Store(p + 2 * i, src[i]);
}

// The tier table of a format whose reference dequantizer is Deq, from its SIMD variants.
template <void (*Deq)(const void*, float*, int64_t), size_t kBytes, const FormatKernels* Avx2,
          const FormatKernels* Avx512, const FormatKernels* Neon>
const FormatKernels& kernels() {
  static const FormatKernels scalar = {Deq, dot_scalar<Deq, 1, kBytes>};
  static const SimdTable<FormatKernels> table(format_variants(&scalar, Avx2, Avx512, nullptr, Neon, nullptr));
  return table.get();
}

// Deq and Quant are the references; Fast the fast-path dequantizer (a copy needs no tiers).
template <const FormatKernels& (*K)(), size_t kBytes, void (*Deq)(const void*, float*, int64_t),
          void (*Quant)(const float*, void*, int64_t), void (*Fast)(const void*, float*, int64_t)>
constexpr WeightFormat float_format(GgmlType type, const char* name) {
  return {type, name, 1, kBytes, Deq, Quant, Fast, Dispatched<K>::dot, nullptr, nullptr, nullptr, K};
}

using F32Kernels = decltype(&kernels<copy_f32, 4, nullptr, nullptr, nullptr>);
constexpr F32Kernels kF32Table = kernels<copy_f32, 4, VLKV_X86(&kF32Avx2), VLKV_X86(&kF32Avx512), VLKV_ARM(&kF32Neon)>;
constexpr F32Kernels kF16Table =
    kernels<dequantize_halves<load_half>, 2, VLKV_X86(&kF16Avx2), VLKV_X86(&kF16Avx512), VLKV_ARM(&kF16Neon)>;
constexpr F32Kernels kBf16Table =
    kernels<dequantize_halves<load_bf16>, 2, VLKV_X86(&kBf16Avx2), VLKV_X86(&kBf16Avx512), VLKV_ARM(&kBf16Neon)>;

}  // namespace

constinit const WeightFormat kF32Format =
    float_format<kF32Table, 4, copy_f32, quantize_f32, copy_f32>(GgmlType::kF32, "f32");
constinit const WeightFormat kF16Format =
    float_format<kF16Table, 2, dequantize_halves<load_half>, quantize_halves<store_half>,
                 Dispatched<kF16Table>::dequantize>(GgmlType::kF16, "f16");
constinit const WeightFormat kBf16Format =
    float_format<kBf16Table, 2, dequantize_halves<load_bf16>, quantize_halves<store_bf16>,
                 Dispatched<kBf16Table>::dequantize>(GgmlType::kBF16, "bf16");

}  // namespace vlkv::quant
