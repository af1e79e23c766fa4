// BF16: bfloat16 per weight (block of 1): the top 16 bits of an f32. Widening is exact;
// narrowing rounds to nearest even (NaN stays quiet), as ggml's.
#include <immintrin.h>

#include "base/cpu_features.h"
#include "quant/half_rows.h"
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

// How bfloat16 widens (shift into the top half of an f32), for half_rows.h.
struct Bf16 {
  static float to_f32(uint16_t h) { return bf16_to_fp32(h); }
  VLKV_TARGET_AVX2 static __m256 widen8(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  VLKV_TARGET_AVX512 static __m512 widen16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

}  // namespace

const WeightFormat kBf16Format = {GgmlType::kBF16, "bf16", 1, 2, dequantize_ref, quantize_ref,
                                 half_rows::dequantize<Bf16, dequantize_ref>,
                                 half_rows::dot<Bf16, dequantize_ref>};

}  // namespace vlkv::quant
