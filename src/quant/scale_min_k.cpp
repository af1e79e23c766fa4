// Q4_K and Q5_K, the two "scale-min" K-quants: super-blocks of 256 weights in 8 sub-blocks of
// 32, each with a 6-bit scale and a 6-bit min (packed as get_scale_min_k4), scaled by the
// super-block's f16 d and dmin; w = (d * sc) * code - (dmin * m).
// Q4_K (144 bytes): d | dmin | scales[12] | qs[128]. Bytes qs[32c .. 32c+31] hold sub-block 2c
//   in their low nibbles and sub-block 2c+1 in their high nibbles.
// Q5_K (176 bytes): d | dmin | scales[12] | qh[32] | qs[128]: Q4_K's nibbles plus a fifth bit
//   per weight; sub-block j's fifth bits are bit j of qh[0..31].
// One template, so the two references cannot drift apart.
#include <cstring>

#include "quant/k_quant_search.h"
#include "quant/quant_internal.h"

namespace vlkv::quant {
namespace {

template <bool kFifthBit>
struct ScaleMinK {
  static constexpr int64_t kQk = 256;
  static constexpr size_t kHighBytes = kFifthBit ? 32 : 0;
  static constexpr size_t kBytes = 16 + kHighBytes + 128;

  // 16 where weight l of sub-block j has its fifth bit set (Q5_K only).
  static int high(const uint8_t* qh, int l, int j) {
    if constexpr (kFifthBit) return (qh[l] >> j) & 1 ? 16 : 0;
    return 0;
  }

  static void dequantize_ref(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t b = 0; b < n / kQk; ++b, p += kBytes) {
      const float d = load_half(p);
      const float dmin = load_half(p + 2);
      const uint8_t* scales = p + 4;
      const uint8_t* qh = p + 16;
      const uint8_t* qs = p + 16 + kHighBytes;
      for (int j = 0; j < 8; j += 2, qs += 32) {
        uint8_t sc, m;
        unpack_scale_min_k4(j, scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        unpack_scale_min_k4(j + 1, scales, &sc, &m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>((qs[l] & 0xF) + high(qh, l, j)) - m1;
        for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>((qs[l] >> 4) + high(qh, l, j + 1)) - m2;
      }
    }
  }

  // Scales, mins and codes by quantize_scale_min_k (k_quant_search.h) with 15 or 31 steps per
  // sub-block; the low 4 bits of each code in nibbles, the fifth in qh.
  static void quantize_ref(const float* src, void* dst, int64_t n) {
    auto* p = static_cast<uint8_t*>(dst);
    for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
      uint8_t L[kQk];
      quantize_scale_min_k(src, kFifthBit ? 31 : 15, p, L);
      uint8_t* qh = p + 16;
      uint8_t* qs = p + 16 + kHighBytes;
      std::memset(qh, 0, kHighBytes);
      for (int j = 0; j < kQk; j += 64, qs += 32) {
        for (int l = 0; l < 32; ++l) {
          const int l1 = L[j + l], l2 = L[j + l + 32];
          if constexpr (kFifthBit) qh[l] = static_cast<uint8_t>(qh[l] | (l1 >> 4) << (j / 32) | (l2 >> 4) << (j / 32 + 1));
          qs[l] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
        }
      }
    }
  }
};

using Q4K = ScaleMinK<false>;
using Q5K = ScaleMinK<true>;

constexpr SimdVariants<FormatKernels> kQ4Tiers =
    VLKV_SIMD_VARIANTS((&kBlockScalar<Q4K::dequantize_ref, Q4K::kQk, Q4K::kBytes>), kQ4_K, avx2, avx2_vnni, avx512,
                       avx512_vnni, neon, dotprod);
constexpr SimdVariants<FormatKernels> kQ5Tiers =
    VLKV_SIMD_VARIANTS((&kBlockScalar<Q5K::dequantize_ref, Q5K::kQk, Q5K::kBytes>), kQ5_K, avx2, avx2_vnni, avx512,
                       avx512_vnni, neon, dotprod);

}  // namespace

const WeightFormat kQ4_KFormat =
    k_quant_format<&kQ4Tiers>(GgmlType::kQ4_K, "q4_K", Q4K::kBytes, Q4K::dequantize_ref, Q4K::quantize_ref);
const WeightFormat kQ5_KFormat =
    k_quant_format<&kQ5Tiers>(GgmlType::kQ5_K, "q5_K", Q5K::kBytes, Q5K::dequantize_ref, Q5K::quantize_ref);

}  // namespace vlkv::quant
