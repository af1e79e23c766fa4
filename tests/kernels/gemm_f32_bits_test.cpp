// The f32 GEMM's SIMD tiers give the same bits on x86 and ARM64: each is checked here against
// the operations it claims, written out with std::fma (exact on every architecture), so an x86
// tier and an ARM64 tier that pass agree bit for bit without a stored hash.
//  - GEMM: every tier above scalar is the fused chain acc = fma(x_k, w_k, acc) over k in order
//    (AVX2, AVX-512, NEON). The scalar reference rounds each product and is left out.
//  - exp_sum: the AVX2 kernel's formula and summation order (8 lanes, then hsum256's pairs, then
//    the tail in order), which the NEON kernel follows; AVX-512 sums 16 lanes in another order
//    (its result is within gemm_f32_test's bounds, not these bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/exp_poly.h"
#include "kernels/gemm_f32.h"
#include "quant/weight_format.h"
#include "../lcg_floats.h"

namespace vlkv {
namespace {

class GemmF32BitsTest : public ::testing::Test {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

using testing_lcg::lcg_floats;

bool has_tier(SimdTier t) {
  const std::vector<SimdTier> all = supported_simd_tiers();
  return std::find(all.begin(), all.end(), t) != all.end();
}

// F32 weights, and F16 ones (dequantized exactly), on shapes with partial tiles and panels and
// several 256-column blocks (the chain continues through the stored partial sums).
TEST_F(GemmF32BitsTest, EveryTierAboveScalarIsTheFusedChain) {
  struct Shape { GgmlType type; int64_t n_rows, n_cols, n_tokens; };
  for (const Shape sh : {Shape{GgmlType::kF32, 37, 600, 13}, Shape{GgmlType::kF16, 70, 520, 7},
                         Shape{GgmlType::kF32, 16, 32, 1}}) {
    const WeightFormat* fmt = find_weight_format(sh.type);
    ASSERT_NE(fmt, nullptr);
    const size_t rb = static_cast<size_t>(sh.n_cols) * fmt->block_bytes;
    std::vector<uint8_t> bytes(rb * sh.n_rows);
    std::vector<float> deq(sh.n_rows * sh.n_cols);
    const std::vector<float> src = lcg_floats(deq.size(), 5, -1.0f, 1.0f);
    for (int64_t r = 0; r < sh.n_rows; ++r) {
      fmt->quantize_row_ref(&src[r * sh.n_cols], bytes.data() + r * rb, sh.n_cols);
      fmt->dequantize_row_ref(bytes.data() + r * rb, &deq[r * sh.n_cols], sh.n_cols);
    }
    const WeightMatrix w{sh.type, bytes.data(), sh.n_rows, sh.n_cols, rb};
    const std::vector<float> x = lcg_floats(sh.n_tokens * sh.n_cols, 7, -1.0f, 1.0f);
    std::vector<float> ref(sh.n_tokens * sh.n_rows);
    for (int64_t t = 0; t < sh.n_tokens; ++t)
      for (int64_t r = 0; r < sh.n_rows; ++r) {
        float acc = 0.0f;
        for (int64_t c = 0; c < sh.n_cols; ++c) acc = std::fma(x[t * sh.n_cols + c], deq[r * sh.n_cols + c], acc);
        ref[t * sh.n_rows + r] = acc;
      }
    int checked = 0;
    for (SimdTier tier : supported_simd_tiers()) {
      if (tier == SimdTier::kScalar) continue;
      set_simd_tier_for_testing(tier);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(ref.size(), NAN);
        gemm_f32(w, x.data(), sh.n_tokens, y.data(), pool);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(ref[i]))
              << ggml_type_name(sh.type) << " tier=" << simd_tier_name(tier) << " threads=" << threads << " i=" << i;
      }
      ++checked;
    }
    if (checked == 0) GTEST_SKIP() << "no SIMD tier on this CPU";
  }
}

// exp_avx2's operations on one value, written out: x = s * scale - shift (fused, as GCC contracts
// the AVX2 code), clamp, n = floor(x log2 e + 1/2), two-part reduction, the polynomial, times 2^n.
float exp_reference(float s, float scale, float shift) {
  using namespace exp_poly;
  float x = std::fma(s, scale, -shift);
  x = std::min(std::max(x, kMin), kMax);
  const float fx = std::floor(std::fma(x, kLog2e, 0.5f));
  float r = std::fma(-fx, kLn2Hi, x);
  r = std::fma(-fx, kLn2Lo, r);
  float p = std::fma(kP0, r, kP1);
  for (float c : {kP2, kP3, kP4, kP5}) p = std::fma(p, r, c);
  const float e = std::fma(p, r * r, r) + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(fx) + 127) << 23;
  return e * std::bit_cast<float>(bits);
}

TEST_F(GemmF32BitsTest, ExpSumIsTheAvx2FormulaAndOrder) {
  int checked = 0;
  for (SimdTier tier : {SimdTier::kAvx2, SimdTier::kAvx2Vnni, SimdTier::kNeon, SimdTier::kDotprod, SimdTier::kI8mm}) {
    if (!has_tier(tier)) continue;
    set_simd_tier_for_testing(tier);
    const GemmF32Kernels& k = gemm_f32_kernels();
    for (int64_t n : {1, 8, 13, 1003}) {  // tails of 1, 0 and 5 lanes; logits spanning the clamp
      std::vector<float> s = lcg_floats(n, 3 + n, -95.0f, 10.0f);
      const float scale = 0.875f, shift = 1.5f;
      std::vector<float> want(n);
      float lanes[8] = {};
      const int64_t full = n / 8 * 8;
      for (int64_t i = 0; i < n; ++i) {
        want[i] = exp_reference(s[i], scale, shift);
        if (i < full) lanes[i % 8] += want[i];
      }
      float want_sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      for (int64_t i = full; i < n; ++i) want_sum += want[i];
      const float sum = k.exp_sum(s.data(), n, scale, shift);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(s[i]), std::bit_cast<uint32_t>(want[i]))
            << simd_tier_name(tier) << " n=" << n << " i=" << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(sum), std::bit_cast<uint32_t>(want_sum)) << simd_tier_name(tier) << " n=" << n;
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "neither the AVX2 nor an ARM64 tier on this CPU";
}

}  // namespace
}  // namespace vlkv
