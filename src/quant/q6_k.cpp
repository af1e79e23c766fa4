// Q6_K: super-blocks of 256 weights in 16 sub-blocks of 16, each with a signed 8-bit
// scale, times the super-block's f16 d. Layout (210 bytes): ql[128] | qh[64] | scales[16] |
// d. Each half of 128 weights uses ql[64], qh[32]: weight l (l < 32) of quarter k takes its
// low 4 bits from ql[l + 32*(k&1)] (low nibble for k < 2, high for k >= 2) and its top 2
// bits from bits 2k..2k+1 of qh[l]; w = (d * scale) * (code - 32).
#include "quant/k_quant_search.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = 256;
constexpr size_t kBytes = 210;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes) {
    const float d = load_half(p + 208);
    const uint8_t* ql = p;
    const uint8_t* qh = p + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
    for (int half = 0; half < 2; ++half, dst += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        dst[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        dst[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        dst[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

// Per sub-block symmetric scale search, 8-bit scales relative to the largest (the one of
// largest magnitude maps to -128 as in ggml), then codes against the stored scales.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    float scales[16];
    int8_t Ls[kQk];
    float max_scale = 0, max_abs = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_scale_symmetric(src + 16 * j, 16, 32, Ls + 16 * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    const float iscale = max_abs > 0 ? -128.0f / max_scale : 0.0f;
    auto* sc = reinterpret_cast<int8_t*>(p + 192);
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(std::clamp(nearest_int(iscale * scales[j]), -128, 127));
    store_half(p + 208, iscale != 0.0f ? 1.0f / iscale : 0.0f);
    const float d = load_half(p + 208);
    uint8_t L[kQk];
    for (int j = 0; j < 16; ++j) {
      const float ds = d * sc[j];
      for (int i = 0; i < 16; ++i) {
        const int l = ds != 0.0f ? nearest_int(src[16 * j + i] / ds) : 0;
        L[16 * j + i] = static_cast<uint8_t>(std::clamp(l, -32, 31) + 32);
      }
    }
    uint8_t* ql = p;
    uint8_t* qh = p + 128;
    for (int j = 0; j < kQk; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t* c = L + j + l;
        ql[l] = static_cast<uint8_t>((c[0] & 0xF) | ((c[64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((c[32] & 0xF) | ((c[96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((c[0] >> 4) | ((c[32] >> 4) << 2) | ((c[64] >> 4) << 4) | ((c[96] >> 4) << 6));
      }
    }
  }
}

constexpr SimdVariants<FormatKernels> kTiers = VLKV_SIMD_VARIANTS(
    (&kBlockScalar<dequantize_ref, kQk, kBytes>), kQ6_K, avx2, avx2_vnni, avx512, avx512_vnni, neon, dotprod);

}  // namespace

const WeightFormat kQ6_KFormat = k_quant_format<&kTiers>(GgmlType::kQ6_K, "q6_K", kBytes, dequantize_ref, quantize_ref);

}  // namespace vlkv::quant
