// Q4_K, Q5_K and Q6_K 8-bit dots at the tiers with the strided kernels (quant/k_strided.h: x86
// above scalar): the prefill GEMM's block steps, written out here in scalar code from the block
// layout, bit for bit; at every tier the strided matvec equals the one-row dot bit for bit for
// 1..16 rows (odd counts and counts that are not a multiple of the 8 rows per vector included)
// and stride 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "quant/q8_activations.h"
#include "quant/weight_format.h"
#include "k_rows_test_util.h"

namespace vlkv {
namespace {

using quant_test::k_activations;
using quant_test::k_rows;

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// Q6_K: per activation block (quarter k of half h of super-block b), per group g of 16: s = the
// exact sum of code * x, then acc = fma(s, (d * sc_g) * dx, acc).
float q6_block_steps(const uint8_t* row, const Q8Activations& x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = row + 210 * static_cast<size_t>(b);
    const float d = half_at(p + 208);
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        const int64_t xb = 8 * b + 4 * h + k;
        for (int g = 0; g < 2; ++g) {
          int32_t sum = 0;
          for (int l = 16 * g; l < 16 * g + 16; ++l) {
            const int lo = (p[64 * h + 32 * (k & 1) + l] >> (4 * (k / 2))) & 0xF;
            const int hi = (p[128 + 32 * h + l] >> (2 * k)) & 3;
            sum += ((lo | (hi << 4)) - 32) * x.q[static_cast<size_t>(32 * xb + l)];
          }
          const int sc = static_cast<int8_t>(p[192 + 8 * h + 2 * k + g]);
          acc = std::fma(static_cast<float>(sum), (d * static_cast<float>(sc)) * x.d[static_cast<size_t>(xb)], acc);
        }
      }
  }
  return acc;
}

// Q4_K / Q5_K: per activation block (sub-block j of super-block b): s = the exact sum of code * x,
// then acc = fma(s, (d * sc) * dx, acc); acc = fma(-(dmin * m), dx * (sum of x), acc).
float block_steps(const uint8_t* row, GgmlType type, const Q8Activations& x, int64_t n) {
  if (type == GgmlType::kQ6_K) return q6_block_steps(row, x, n);
  const bool q5 = type == GgmlType::kQ5_K;
  const size_t bytes = q5 ? 176 : 144;
  float acc = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = row + bytes * static_cast<size_t>(b);
    const uint8_t* s = p + 4;  // ggml's get_scale_min_k4
    for (int j = 0; j < 8; ++j) {
      const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
      const int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      const int64_t xb = 8 * b + j;
      int32_t sum = 0, xsum = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t q = p[(q5 ? 48 : 16) + 32 * (j / 2) + l];
        int code = j % 2 ? q >> 4 : q & 0xF;
        if (q5) code |= ((p[16 + l] >> j) & 1) << 4;
        const int xv = x.q[static_cast<size_t>(32 * xb + l)];
        sum += code * xv;
        xsum += xv;
      }
      const float dx = x.d[static_cast<size_t>(xb)];
      acc = std::fma(static_cast<float>(sum), (half_at(p) * static_cast<float>(sc)) * dx, acc);
      acc = std::fma(-(half_at(p + 2) * static_cast<float>(m)), dx * static_cast<float>(xsum), acc);
    }
  }
  return acc;
}

class KStrided : public testing::TestWithParam<GgmlType> {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

// Tolerance 0: exact integer sums and these f32 steps at every tier above scalar.
TEST_P(KStrided, TiersTakeTheBlockStepsBitForBit) {
  const WeightFormat* f = find_weight_format(GetParam());
  std::mt19937 rng(9);
  int n_tiers = 0;
  for (SimdTier tier : supported_simd_tiers()) {
    set_simd_tier_for_testing(tier);
    if (f->kernels().dot_q8_strided == nullptr) continue;  // scalar and ARM: their own dot_q8
    ++n_tiers;
    for (int64_t n : {256, 768, 2304}) {
      const std::vector<uint8_t> rows = k_rows(*f, 3, n, rng);
      const Q8Activations xq = k_activations(n, rng);
      const size_t rb = rows.size() / 3;
      for (int r = 0; r < 3; ++r)
        EXPECT_EQ(f->dot_q8(rows.data() + rb * r, xq, n), block_steps(rows.data() + rb * r, GetParam(), xq, n))
            << f->name << " " << simd_tier_name(tier) << " n " << n << " row " << r;
    }
  }
  if (n_tiers == 0) GTEST_SKIP() << "no tier with the strided kernels on this CPU";
}

// Tolerance 0: the matvec and the one-row dot are one kernel.
TEST_P(KStrided, MatvecEqualsOneRowDotsBitForBit) {
  const WeightFormat* f = find_weight_format(GetParam());
  ASSERT_NE(f->dot_q8_strided, nullptr);
  std::mt19937 rng(10);
  constexpr int kRows = kLaneRows + 1;
  for (int64_t n : {256, 1280}) {
    const std::vector<uint8_t> rows = k_rows(*f, kRows, n, rng);
    const size_t rb = rows.size() / kRows;
    const Q8Activations xq = k_activations(n, rng);
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      for (int nr = 1; nr <= kRows; ++nr) {
        std::vector<float> out(static_cast<size_t>(nr), -1.0f);
        f->dot_q8_strided(rows.data(), static_cast<int64_t>(rb), nr, xq, n, out.data());
        for (int r = 0; r < nr; ++r)
          EXPECT_EQ(out[r], f->dot_q8(rows.data() + rb * r, xq, n))
              << f->name << " " << simd_tier_name(tier) << " n " << n << " rows " << nr << " r " << r;
      }
      float one = -1.0f;
      f->dot_q8_strided(rows.data() + rb, 0, 1, xq, n, &one);  // stride 0: one row
      EXPECT_EQ(one, f->dot_q8(rows.data() + rb, xq, n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KQuants, KStrided, testing::Values(GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

}  // namespace
}  // namespace vlkv
