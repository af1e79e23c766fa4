// Q8_0: blocks of 32 weights, one f16 scale d and 32 signed bytes.
// Layout (34 bytes): d | qs[32]; w = qs[j] * d.
#include "quant/q8_dot.h"
#include "quant/simd_blocks.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = 32;
constexpr size_t kBytes = 34;

void dequantize_ref(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, dst += kQk) {
    const float d = load_half(p);
    const auto* qs = reinterpret_cast<const int8_t*>(p + 2);
    for (int j = 0; j < kQk; ++j) dst[j] = static_cast<float>(qs[j]) * d;
  }
}

// ggml's quantize_row_q8_0_ref: d = amax / 127, codes rounded half away from zero.
void quantize_ref(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kQk; ++b, p += kBytes, src += kQk) {
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half(p, d);
    for (int j = 0; j < kQk; ++j) {
      p[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(src[j] * id)));
    }
  }
}

struct Traits {
  static constexpr int64_t kBlockElems = kQk;
  static constexpr size_t kBlockBytes = kBytes;
  static constexpr int kGroups = 1;
  static constexpr bool kBias = false;
  VLKV_TARGET_AVX2 static void decode(const uint8_t* p, Group32* g) {
    g->q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    g->s0 = g->s1 = half_f16c(p);
    g->b0 = g->b1 = 0.0f;
  }
};

using Kernels = BlockKernels<Traits, dequantize_ref>;

}  // namespace

const WeightFormat kQ8_0Format = {GgmlType::kQ8_0, "q8_0", kQk, kBytes, dequantize_ref, quantize_ref,
                                  Kernels::dequantize, Kernels::dot,
                                  dot_q8_dispatch<Traits, dequantize_ref>};

}  // namespace vlkv::quant
