// Q4_0: blocks of 32 weights, one f16 scale d and 16 bytes of 4-bit codes.
// Layout (18 bytes): d | qs[16]; weight j is low nibble of qs[j], weight j+16 its high
// nibble; w = (code - 8) * d.
#include "quant/q8_dot.h"
#include "quant/simd_blocks.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = 32;
constexpr size_t kBytes = 18;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const uint8_t* qs = p + 2;
    for (int j = 0; j < kQk / 2; ++j) {
      const int x0 = (qs[j] & 0x0F) - 8;
      const int x1 = (qs[j] >> 4) - 8;
      dst[j] = static_cast<float>(x0) * d;
      dst[j + kQk / 2] = static_cast<float>(x1) * d;
    }
  }
}

// ggml's quantize_row_q4_0_ref: the signed value of largest magnitude maps to -8.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQk; ++j) {
      if (amax < std::fabs(src[j])) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    for (int j = 0; j < kQk / 2; ++j) {
      const float x0 = src[j] * id;
      const float x1 = src[j + kQk / 2] * id;
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      p[2 + j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

struct Traits {
  static constexpr int64_t kBlockElems = kQk;
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr int kGroups = 1;
  static constexpr bool kBias = false;
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    g->q = _mm256_sub_epi8(nibbles_lo_hi(p + 2), _mm256_set1_epi8(8));
    g->s0 = g->s1 = half_f16c(p);
    g->b0 = g->b1 = 0.0f;
  }
  static constexpr size_t kQsOffset = 2;
  static constexpr int kChunkBytes = 16;
  static constexpr int kChunks = 1;
  VLKV_TARGET_AVX512 static void make_luts(const uint8_t* p, __m512* luts) {
    // (code - 8) * d, the reference's product (code - 8 is exact in f32).
    luts[0] = luts[1] = _mm512_mul_ps(_mm512_sub_ps(iota16_ps(), _mm512_set1_ps(8.0f)), _mm512_set1_ps(half_f16c(p)));
  }
};

using Kernels = LutKernels<Traits, dequantize_ref>;

}  // namespace

const WeightFormat kQ4_0Format = {GgmlType::kQ4_0, "q4_0", kQk, kBytes, dequantize_ref, quantize_ref,
                                  Kernels::dequantize, Kernels::dot,
                                  dot_q8_dispatch<Traits, dequantize_ref>};

}  // namespace vlkv::quant
