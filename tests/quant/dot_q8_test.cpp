// Integer dot products with 8-bit activations (WeightFormat::dot_q8): every SIMD level
// against the scalar reference (exact dequantized weights x rounded activations, in
// double), and the rounded result close to the exact f32 dot.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "quant/q8_activations.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

class DotQ8 : public testing::TestWithParam<GgmlType> {
 protected:
  void TearDown() override { set_simd_level_for_testing(SimdLevel::kAvx512); }
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
    for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
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
  set_simd_level_for_testing(SimdLevel::kAvx512);
  Q8Activations fast;
  quantize_activations_q8(x.data(), n, fast);
  EXPECT_EQ(fast.q, ref.q);
  EXPECT_EQ(fast.d, ref.d);
  EXPECT_EQ(fast.half_sum, ref.half_sum);
  EXPECT_EQ(ref.q[1], -4);  // 1 - 4.5 = -3.5 -> -4
  EXPECT_EQ(ref.q[5], 1);   // 0.5 -> 1
}

// dot_q8_rows (one weight row with up to kMaxDotRows activation rows) equals dot_q8 of each
// row bit for bit (tolerance 0: the same integer lane sums and f32 steps), at every level,
// block counts with and without a tail of 1-3 blocks, weight codes of -128 included.
TEST(DotQ8Rows, EqualsOneRowDotsBitForBit) {
  for (const GgmlType type : {GgmlType::kQ8_0}) {
    const WeightFormat* f = find_weight_format(type);
    ASSERT_NE(f->dot_q8_rows, nullptr);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t n : {32, 96, 256, 2080}) {
      std::vector<float> w(n);
      for (auto& v : w) v = nd(rng);
      std::vector<uint8_t> row(f->block_bytes * (n / f->block_elems));
      f->quantize_row_ref(w.data(), row.data(), n);
      row[2] = 0x80;  // a -128 code (not what ggml writes, but a file may hold it)
      std::vector<Q8Activations> xs(kMaxDotRows);
      std::vector<const Q8Activations*> ptrs;
      for (auto& xq : xs) {
        std::vector<float> x(n);
        for (auto& v : x) v = nd(rng) * (rng() % 8 == 0 ? 20.0f : 1.0f);
        quantize_activations_q8(x.data(), n, xq);
        ptrs.push_back(&xq);
      }
      for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
        set_simd_level_for_testing(level);
        for (int n_x = 1; n_x <= kMaxDotRows; ++n_x) {
          std::vector<float> out(n_x);
          f->dot_q8_rows(row.data(), ptrs.data(), n_x, n, out.data());
          for (int t = 0; t < n_x; ++t) EXPECT_EQ(out[t], f->dot_q8(row.data(), xs[t], n)) << n << " " << n_x << " " << t;
        }
      }
    }
  }
}

// dot_q8_tile (up to kMaxTileRows weight rows x kMaxTileX activation rows) equals dot_q8 of
// each pair bit for bit (tolerance 0, as above), at every level, with prepared operands (n a
// multiple of 64, with and without a tail of 1-3 blocks) and without (n = 96: the pairwise
// fallback), weight codes of -128 included.
TEST(DotQ8Tile, EqualsPairDotsBitForBit) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ8_0);
  ASSERT_NE(f->dot_q8_tile, nullptr);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {96, 256, 448, 2048}) {
    std::vector<std::vector<uint8_t>> rows(kMaxTileRows, std::vector<uint8_t>(f->block_bytes * (n / f->block_elems)));
    for (auto& row : rows) {
      std::vector<float> w(n);
      for (auto& v : w) v = nd(rng);
      f->quantize_row_ref(w.data(), row.data(), n);
    }
    rows[0][2] = 0x80;  // a -128 code
    rows[1][rows[1].size() - 1] = 0x80;  // and one in the last block (a tail block at n = 448)
    const void* row_ptrs[kMaxTileRows] = {rows[0].data(), rows[1].data()};
    std::vector<Q8Activations> xs(kMaxTileX);
    std::vector<const Q8Activations*> ptrs;
    for (auto& xq : xs) {
      std::vector<float> x(n);
      for (auto& v : x) v = nd(rng) * (rng() % 8 == 0 ? 20.0f : 1.0f);
      quantize_activations_q8(x.data(), n, xq);
      prepare_q8_tile_operands(xq);
      EXPECT_EQ(xq.biased.empty(), n % 64 != 0) << n;
      ptrs.push_back(&xq);
    }
    for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
      set_simd_level_for_testing(level);
      for (int n_rows = 1; n_rows <= kMaxTileRows; ++n_rows)
        for (int n_x = 1; n_x <= kMaxTileX; ++n_x) {
          std::vector<float> out(n_rows * n_x);
          f->dot_q8_tile(row_ptrs, n_rows, ptrs.data(), n_x, n, out.data());
          for (int i = 0; i < n_rows; ++i)
            for (int t = 0; t < n_x; ++t)
              EXPECT_EQ(out[i * n_x + t], f->dot_q8(row_ptrs[i], xs[t], n)) << n << " " << n_rows << "x" << n_x;
        }
    }
  }
}

}  // namespace
}  // namespace vlkv
