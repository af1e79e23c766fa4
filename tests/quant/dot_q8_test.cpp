// Integer dot products with 8-bit activations (WeightFormat::dot_q8): every SIMD level
// against the scalar reference (exact dequantized weights x rounded activations, in
// double), and the rounded result close to the exact f32 dot.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "quant/q8_activations.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

class DotQ8 : public testing::TestWithParam<GgmlType> {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

TEST_P(DotQ8, AllLevelsMatchReference) {
  const WeightFormat* f = find_weight_format(GetParam());
  ASSERT_NE(f, nullptr);
  ASSERT_NE(f->dot_q8, nullptr) << f->name;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {256, 768, 2048}) {
    std::vector<float> w(n), x(n);
    for (auto& v : w) v = nd(rng);
    for (auto& v : x) v = nd(rng) * (rng() % 8 == 0 ? 20.0f : 1.0f);  // a few outliers per block
    std::vector<uint8_t> row(f->block_bytes * (n / f->block_elems));
    f->quantize_row_ref(w.data(), row.data(), n);
    Q8Activations xq;
    quantize_activations_q8(x.data(), n, xq);

    set_simd_level_for_testing(SimdLevel::kScalar);
    const float ref = f->dot_q8(row.data(), xq, n);
    double abs_sum = 0, exact = 0;
    std::vector<float> wd(n);
    f->dequantize_row_ref(row.data(), wd.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      abs_sum += std::fabs(wd[i] * x[i]);
      exact += static_cast<double>(wd[i]) * x[i];
    }
    for (SimdLevel level : supported_simd_levels()) {
      if (level == SimdLevel::kScalar) continue;
      set_simd_level_for_testing(level);
      const float fast = f->dot_q8(row.data(), xq, n);
      // f32 sums of exact integer products: rounding grows with the number of groups.
      EXPECT_NEAR(fast, ref, 1e-5 * abs_sum) << f->name << " n=" << n << " " << simd_level_name(simd_level());
    }
    // Activation rounding: each x moves by at most half a step (amax/254) of its block.
    EXPECT_NEAR(ref, exact, 0.01 * abs_sum + 1e-3) << f->name;
  }
}

INSTANTIATE_TEST_SUITE_P(BlockFormats, DotQ8,
                         testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                         GgmlType::kQ5_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

TEST(Q8Activations, RoundsLikeQ8_0) {
  // The activation codes and scale equal the Q8_0 format's reference quantizer.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(0.37f * i) * (i % 7 == 0 ? 9.0f : 1.0f);
  Q8Activations a;
  quantize_activations_q8(x.data(), 64, a);
  const WeightFormat* q8 = find_weight_format(GgmlType::kQ8_0);
  std::vector<uint8_t> blocks(2 * 34);
  q8->quantize_row_ref(x.data(), blocks.data(), 64);
  std::vector<float> deq(64);
  q8->dequantize_row_ref(blocks.data(), deq.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(a.q[i] * a.d[i / 32], deq[i]) << i;
  EXPECT_EQ(a.half_sum.size(), 4u);
}

// The SIMD rounding equals the scalar one bit for bit, ties (x.5 steps) and zeros included.
TEST(Q8Activations, SimdRoundingMatchesScalar) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t n = 4096;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = nd(rng);
  // A block whose codes land on ties: amax 127 gives step 1, so k + 0.5 rounds away from zero.
  for (int j = 0; j < 32; ++j) x[j] = (j == 0 ? 127.0f : static_cast<float>(j % 9) - 4.5f);
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;                  // all-zero block: scale 0
  for (int j = 64; j < 96; ++j) x[j] = (j % 2 ? -1.0f : 1.0f) * 1e-30f;
  set_simd_level_for_testing(SimdLevel::kScalar);
  Q8Activations ref;
  quantize_activations_q8(x.data(), n, ref);
  set_simd_tier_for_testing(simd_tier_default());
  Q8Activations fast;
  quantize_activations_q8(x.data(), n, fast);
  EXPECT_EQ(fast.q, ref.q);
  EXPECT_EQ(fast.d, ref.d);
  EXPECT_EQ(fast.half_sum, ref.half_sum);
  EXPECT_EQ(ref.q[1], -4);  // 1 - 4.5 = -3.5 -> -4
  EXPECT_EQ(ref.q[5], 1);   // 0.5 -> 1
}

std::vector<uint8_t> q8_0_row(const WeightFormat* f, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> w(n);
  for (auto& v : w) v = nd(rng);
  std::vector<uint8_t> row(f->block_bytes * (n / f->block_elems));
  f->quantize_row_ref(w.data(), row.data(), n);
  return row;
}
Q8Activations q8_activations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * (rng() % 8 == 0 ? 20.0f : 1.0f);  // a few outliers per block
  Q8Activations xq;
  quantize_activations_q8(x.data(), n, xq);
  return xq;
}

// Above scalar every Q8_0 dot takes one order, written out here in scalar code:
// per block the exact integer sum, then acc = fma(sum, dw * dx, acc) block after block
// (tolerance 0: the kernels must take exactly these steps, so batched = solo bit for bit).
TEST(DotQ8, Q8_0SimdTiersTakeTheBlockOrderBitForBit) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ8_0);
  std::mt19937 rng(5);
  int n_tiers = 0;
  for (SimdTier tier : supported_simd_tiers()) {
  set_simd_tier_for_testing(tier);
  if (simd_tier() == SimdTier::kScalar) continue;
  ++n_tiers;
  for (int64_t n : {32, 96, 256, 2080}) {
    std::vector<uint8_t> row = q8_0_row(f, n, rng);
    row[2] = 0x80;  // a -128 code (not what ggml writes, but a file may hold it)
    const Q8Activations xq = q8_activations(n, rng);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
      const uint8_t* blk = row.data() + 34 * b;
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(blk[2 + j]) * xq.q[static_cast<size_t>(32 * b + j)];
      uint16_t h;
      std::memcpy(&h, blk, 2);
      acc = std::fma(static_cast<float>(sum), fp16_to_fp32(h) * xq.d[static_cast<size_t>(b)], acc);
    }
    EXPECT_EQ(f->dot_q8(row.data(), xq, n), acc) << n << " " << simd_tier_name(tier);
  }
  }
  set_simd_tier_for_testing(simd_tier_default());  // back to the best tier (VLKV_SIMD caps it)
  if (n_tiers == 0) GTEST_SKIP() << "no SIMD tier on this CPU";
}

// dot_q8_strided (up to 16 weight rows a stride apart, one activation row) equals dot_q8 of
// each row bit for bit (tolerance 0), at every tier, block counts odd and even.
TEST(DotQ8Strided, EqualsOneRowDotsBitForBit) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ8_0);
  ASSERT_NE(f->dot_q8_strided, nullptr);
  std::mt19937 rng(3);
  constexpr int kRows = kLaneRows + 1;
  for (int64_t n : {32, 96, 256, 2080}) {
    const size_t rb = f->block_bytes * (n / f->block_elems);
    std::vector<uint8_t> rows;
    for (int r = 0; r < kRows; ++r) {
      const std::vector<uint8_t> row = q8_0_row(f, n, rng);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    rows[2] = 0x80;                // a -128 code in the first block
    rows[rows.size() - 1] = 0x80;  // and in the last (a lone tail block at odd counts)
    const Q8Activations xq = q8_activations(n, rng);
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      for (int nr = 1; nr <= kRows; ++nr) {
        std::vector<float> out(nr);
        f->dot_q8_strided(rows.data(), static_cast<int64_t>(rb), nr, xq, n, out.data());
        for (int r = 0; r < nr; ++r)
          EXPECT_EQ(out[r], f->dot_q8(rows.data() + r * rb, xq, n)) << n << " " << nr << " " << r;
      }
      float one;
      f->dot_q8_strided(rows.data() + rb, 0, 1, xq, n, &one);  // stride 0: one row
      EXPECT_EQ(one, f->dot_q8(rows.data() + rb, xq, n));
    }
  }
  set_simd_tier_for_testing(simd_tier_default());
}

// dot_q8_lanes (up to kMaxLaneWeightRows weight rows x kLaneRows interleaved activation rows)
// equals dot_q8 of each pair bit for bit (tolerance 0), at every tier, weight codes of -128
// included, every group size.
TEST(DotQ8Lanes, EqualsPairDotsBitForBit) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ8_0);
  ASSERT_NE(f->dot_q8_lanes, nullptr);
  std::mt19937 rng(4);
  constexpr int kLanes = kLaneRows + 1;
  for (int64_t n : {32, 96, 448, 2048}) {
    std::vector<std::vector<uint8_t>> rows;
    for (int i = 0; i < kMaxLaneWeightRows; ++i) rows.push_back(q8_0_row(f, n, rng));
    rows[0][2] = 0x80;
    rows[1][rows[1].size() - 1] = 0x80;
    std::vector<const void*> row_ptrs;
    for (const auto& r : rows) row_ptrs.push_back(r.data());
    std::vector<Q8Activations> xs;
    for (int l = 0; l < kLaneRows; ++l) xs.push_back(q8_activations(n, rng));
    std::vector<const Q8Activations*> ptrs;
    for (const auto& x : xs) ptrs.push_back(&x);
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      for (int n_x : {1, 2, 7, kLaneRows}) {
        Q8Lanes lanes;
        interleave_q8_lanes(ptrs.data(), n_x, lanes);
        for (int nr = 1; nr <= kMaxLaneWeightRows; ++nr) {
          std::vector<float> out(static_cast<size_t>(nr * kLanes));
          f->dot_q8_lanes(row_ptrs.data(), nr, lanes, n, out.data());
          for (int i = 0; i < nr; ++i)
            for (int l = 0; l < n_x; ++l)
              EXPECT_EQ(out[i * kLanes + l], f->dot_q8(row_ptrs[i], xs[l], n)) << n << " " << nr << "x" << n_x;
        }
      }
    }
  }
  set_simd_tier_for_testing(simd_tier_default());
}

}  // namespace
}  // namespace vlkv
