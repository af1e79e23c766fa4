// Q4_K: super-blocks of 256 weights in 8 sub-blocks of 32, each with a 6-bit scale and
// 6-bit min, scaled by the super-block's f16 d and dmin. Layout (144 bytes):
// d | dmin | scales[12] (packed as get_scale_min_k4) | qs[128]. Bytes qs[32c .. 32c+31]
// hold sub-block 2c in their low nibbles and sub-block 2c+1 in their high nibbles;
// w = (d * sc) * code - (dmin * m).
#include "quant/k_quant_search.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = 256;
constexpr size_t kBytes = 144;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes) {
    const float d = load_half(p);
    const float dmin = load_half(p + 2);
    const uint8_t* scales = p + 4;
    const uint8_t* q = p + 16;
    for (int j = 0; j < 8; j += 2, q += 32) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      unpack_scale_min_k4(j + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Scales, mins and codes by quantize_scale_min_k (k_quant_search.h), codes packed in nibbles.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    uint8_t L[kQk];
    quantize_scale_min_k(src, 15, p, L);
    uint8_t* q = p + 16;
    for (int j = 0; j < kQk; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

constexpr SimdVariants<FormatKernels> kTiers = VLKV_SIMD_VARIANTS(
    (&kBlockScalar<dequantize_ref, kQk, kBytes>), kQ4_K, avx2, avx2_vnni, avx512, avx512_vnni, neon, dotprod);

}  // namespace

const WeightFormat kQ4_KFormat = k_quant_format<&kTiers>(GgmlType::kQ4_K, "q4_K", kBytes, dequantize_ref, quantize_ref);

}  // namespace vlkv::quant
