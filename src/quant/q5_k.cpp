// Q5_K: super-blocks of 256 weights as Q4_K plus a fifth bit per weight. Layout (176 bytes):
// d | dmin | scales[12] | qh[32] | qs[128]. Sub-blocks 2c and 2c+1 take the low and high
// nibbles of qs[32c .. 32c+31]; their fifth bits are bits 2c and 2c+1 of qh[0..31];
// w = (d * sc) * code - (dmin * m).
#include "quant/k_quant_search.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = 256;
constexpr size_t kBytes = 176;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes) {
    const float d = load_half(p);
    const float dmin = load_half(p + 2);
    const uint8_t* scales = p + 4;
    const uint8_t* qh = p + 16;
    const uint8_t* ql = p + 48;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      unpack_scale_min_k4(j + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

// As Q4_K's quantizer with 31 steps per sub-block.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    uint8_t L[kQk];
    quantize_scale_min_k(src, 31, p, L);
    uint8_t* qh = p + 16;
    uint8_t* ql = p + 48;
    std::memset(qh, 0, 32);
    unsigned m1 = 1, m2 = 2;
    for (int j = 0; j < kQk; j += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
      for (int l = 0; l < 32; ++l) {
        int l1 = L[j + l], l2 = L[j + l + 32];
        if (l1 > 15) { l1 -= 16; qh[l] = static_cast<uint8_t>(qh[l] | m1); }
        if (l2 > 15) { l2 -= 16; qh[l] = static_cast<uint8_t>(qh[l] | m2); }
        ql[l] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
  }
}

constexpr SimdVariants<FormatKernels> kTiers = VLKV_SIMD_VARIANTS(
    (&kBlockScalar<dequantize_ref, kQk, kBytes>), kQ5_K, avx2, avx2_vnni, avx512, avx512_vnni, neon, dotprod);

}  // namespace

const WeightFormat kQ5_KFormat = k_quant_format<&kTiers>(GgmlType::kQ5_K, "q5_K", kBytes, dequantize_ref, quantize_ref);

}  // namespace vlkv::quant
