// Q8_0: blocks of 32 weights, one f16 scale d and 32 signed bytes.
// Layout (34 bytes): d | qs[32]; w = qs[j] * d.
#include "base/check.h"
#include "quant/q8_0_lanes.h"
#include "quant/q8_dot.h"
#include "quant/simd_blocks.h"

namespace vlkv::quant {
namespace {

constexpr int64_t kQk = q8lanes::kQk;  // the layout, stated once in q8_0_lanes.h
constexpr size_t kBytes = q8lanes::kBytes;

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

void dot_q8_strided(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out);

// Dispatch: above scalar the block order of q8_0_lanes.h, else the scalar reference.
float dot_q8(const void* row, const Q8Activations& x, int64_t n) {
  if (simd_tier() == SimdTier::kScalar) return dot_q8_scalar<dequantize_ref, kQk, kBytes>(row, x, n);
  float out;
  dot_q8_strided(row, 0, 1, x, n, &out);
  return out;
}

void dot_q8_strided(const void* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out) {
  VLKV_CHECK(n_rows >= 1 && n_rows <= q8lanes::kLanes && stride >= 0 &&
             stride * (q8lanes::kLanes - 1) < (int64_t{1} << 31));
  const auto* p = static_cast<const uint8_t*>(base);
  switch (simd_tier()) {
    case SimdTier::kAvx512Vnni: return q8lanes::strided_avx512vnni(p, stride, n_rows, x, n, out);
    case SimdTier::kAvx2Vnni: return q8lanes::strided_avx2vnni(p, stride, n_rows, x, n, out);
    case SimdTier::kAvx2:
    case SimdTier::kAvx512: return q8lanes::strided_avx2(p, stride, n_rows, x, n, out);
    case SimdTier::kScalar:
      for (int r = 0; r < n_rows; ++r) out[r] = dot_q8(p + r * stride, x, n);
  }
}

void dot_q8_lanes(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out) {
  VLKV_CHECK(n_rows >= 1 && n_rows <= kMaxLaneWeightRows && x.n == n && x.n_rows >= 1);
  switch (simd_tier()) {
    case SimdTier::kAvx512Vnni: return q8lanes::lanes_avx512vnni(rows, n_rows, x, n, out);
    case SimdTier::kAvx2Vnni: return q8lanes::lanes_avx2vnni(rows, n_rows, x, n, out);
    case SimdTier::kAvx2:
    case SimdTier::kAvx512: return q8lanes::lanes_avx2(rows, n_rows, x, n, out);
    case SimdTier::kScalar:  // the contract's definition, pair by pair
      for (int i = 0; i < n_rows; ++i)
        for (int l = 0; l < x.n_rows; ++l) out[i * q8lanes::kLanes + l] = dot_q8(rows[i], *x.rows[l], n);
  }
}

}  // namespace

const WeightFormat kQ8_0Format = {GgmlType::kQ8_0, "q8_0", kQk, kBytes, dequantize_ref, quantize_ref,
                                  Kernels::dequantize, Kernels::dot,
                                  dot_q8, dot_q8_strided, dot_q8_lanes};

}  // namespace vlkv::quant
