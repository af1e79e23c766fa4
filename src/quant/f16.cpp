// F16: IEEE half per weight (block of 1). Conversions are exact one way (f16 -> f32)
// and round to nearest even the other, as ggml's.
#include <immintrin.h>

#include "base/cpu_features.h"
#include "quant/half_rows.h"
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

// How halves widen, for half_rows.h.
struct F16 {
  static float to_f32(uint16_t h) { return fp16_to_fp32(h); }
  VLKV_TARGET_AVX2 static __m256 widen8(__m128i h) { return _mm256_cvtph_ps(h); }
  VLKV_TARGET_AVX512 static __m512 widen16(__m256i h) { return _mm512_cvtph_ps(h); }
};

}  // namespace

const WeightFormat kF16Format = {GgmlType::kF16, "f16", 1, 2, dequantize_ref, quantize_ref,
                                 half_rows::dequantize<F16, dequantize_ref>,
                                 half_rows::dot<F16, dequantize_ref>};

}  // namespace vlkv::quant
