// The 8-row packed K-quant layout (quant/k_packed.h): unpack(pack(W)) == W byte for byte, and at
// every tier the packed decode kernel equals the row-by-row dot_q8 (the strided kernels, whose
// steps k_strided_test.cpp checks against the block steps) bit for bit, for 8, 16 and 24 rows and
// K from 256 to 2304; shapes that cannot be packed are refused.
#include "quant/k_packed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "quant/q8_activations.h"
#include "quant/weight_format.h"
#include "k_rows_test_util.h"

namespace vlkv {
namespace {

using quant::kPackRows;

using quant_test::k_activations;
using quant_test::k_rows;

class KPacked : public testing::TestWithParam<GgmlType> {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

// Any bytes (packing moves bytes, it reads no field): every row and block range comes back.
TEST_P(KPacked, UnpackOfPackIsTheIdentity) {
  const WeightFormat* f = find_weight_format(GetParam());
  std::mt19937 rng(21);
  for (int n_rows : {8, 16, 24}) {
    for (int64_t n : {256, 768, 2304}) {
      const size_t rb = f->block_bytes * static_cast<size_t>(n / 256);
      std::vector<uint8_t> w(rb * static_cast<size_t>(n_rows)), packed(w.size());
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      quant::pack_rows8(f->type, w.data(), n_rows, rb, packed.data());
      EXPECT_NE(packed, w) << "packing moved nothing";
      std::vector<uint8_t> row(rb);
      for (int r = 0; r < n_rows; ++r) {
        quant::unpack_row8(f->type, packed.data(), rb, r, 0, n / 256, row.data());
        EXPECT_TRUE(std::equal(row.begin(), row.end(), w.begin() + static_cast<std::ptrdiff_t>(rb * r)))
            << f->name << " rows " << n_rows << " n " << n << " row " << r;
      }
      if (n >= 768) {  // a block range: blocks 1..2 of row 5
        quant::unpack_row8(f->type, packed.data(), rb, 5, 1, 2, row.data());
        EXPECT_TRUE(std::equal(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(2 * f->block_bytes),
                               w.begin() + static_cast<std::ptrdiff_t>(rb * 5 + f->block_bytes)));
      }
    }
  }
}

// Tolerance 0: the packed kernels take the strided kernels' exact integer sums and f32 steps
// (and the tiers without one unpack rows into dot_q8).
TEST_P(KPacked, PackedMatvecEqualsRowDotsBitForBit) {
  const WeightFormat* f = find_weight_format(GetParam());
  std::mt19937 rng(22);
  int n_kernels = 0;
  for (int n_rows : {8, 16, 24}) {
    for (int64_t n : {256, 512, 1280, 2304}) {
      const std::vector<uint8_t> w = k_rows(*f, n_rows, n, rng);
      const size_t rb = w.size() / static_cast<size_t>(n_rows);
      std::vector<uint8_t> packed(w.size());
      quant::pack_rows8(f->type, w.data(), n_rows, rb, packed.data());
      const Q8Activations xq = k_activations(n, rng);
      for (SimdTier tier : supported_simd_tiers()) {
        set_simd_tier_for_testing(tier);
        n_kernels += quant::has_packed8_kernel(*f);
        for (int g = 0; g < n_rows; g += kPackRows) {
          float out[kPackRows];
          quant::dot_q8_packed8(*f, packed.data() + rb * static_cast<size_t>(g), rb, xq, n, out);
          for (int r = 0; r < kPackRows; ++r)
            EXPECT_EQ(out[r], f->dot_q8(w.data() + rb * static_cast<size_t>(g + r), xq, n))
                << f->name << " " << simd_tier_name(tier) << " n " << n << " row " << g + r;
        }
      }
    }
  }
#if defined(__x86_64__)
  if (cpu_features().avx2) {
    EXPECT_GT(n_kernels, 0) << "x86 tiers above scalar have packed kernels";
  }
#endif
}

// The largest codes (every code bit set: Q4_K 15, Q5_K 31, Q6_K 63) against activation codes of
// +-127 give the largest per-lane sums, which plain AVX2 keeps in 16 bits across units
// (k_packed_x86.h): the packed kernel still equals dot_q8 bit for bit (tolerance 0).
TEST_P(KPacked, PackedMatvecExactAtTheLargestCodes) {
  const WeightFormat* f = find_weight_format(GetParam());
  std::mt19937 rng(23);
  constexpr int64_t n = 512;
  std::vector<uint8_t> w = k_rows(*f, kPackRows, n, rng);  // reference headers (d, dmin, scales)
  // each block's code bytes: Q4_K qs [16, 144); Q5_K qh, qs [16, 176); Q6_K ql, qh [0, 192)
  const size_t begin = GetParam() == GgmlType::kQ6_K ? 0 : 16, end = GetParam() == GgmlType::kQ6_K ? 192 : f->block_bytes;
  for (size_t blk = 0; blk < w.size(); blk += f->block_bytes)
    std::fill(w.begin() + static_cast<std::ptrdiff_t>(blk + begin), w.begin() + static_cast<std::ptrdiff_t>(blk + end), 0xFF);
  const size_t rb = w.size() / kPackRows;
  std::vector<uint8_t> packed(w.size());
  quant::pack_rows8(f->type, w.data(), kPackRows, rb, packed.data());
  for (float sign : {1.0f, -1.0f}) {
    const std::vector<float> x(static_cast<size_t>(n), sign);
    Q8Activations xq;
    quantize_activations_q8(x.data(), n, xq);
    ASSERT_EQ(xq.q[0], sign * 127);
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      float out[kPackRows];
      quant::dot_q8_packed8(*f, packed.data(), rb, xq, n, out);
      for (int r = 0; r < kPackRows; ++r)
        EXPECT_EQ(out[r], f->dot_q8(w.data() + rb * static_cast<size_t>(r), xq, n))
            << f->name << " " << simd_tier_name(tier) << " sign " << sign << " row " << r;
    }
  }
}

TEST_P(KPacked, OnlyWholeGroupsOfEightRowsPack) {
  EXPECT_TRUE(quant::can_pack_rows8(GetParam(), 16, 512));
  EXPECT_FALSE(quant::can_pack_rows8(GetParam(), 12, 512));
  EXPECT_FALSE(quant::can_pack_rows8(GetParam(), 7, 512));
  EXPECT_FALSE(quant::can_pack_rows8(GetParam(), 8, 300));
  EXPECT_FALSE(quant::can_pack_rows8(GetParam(), 0, 512));
}

INSTANTIATE_TEST_SUITE_P(KQuants, KPacked, testing::Values(GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

TEST(KPackedFormats, OtherFormatsDoNotPack) {
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kF16, GgmlType::kF32})
    EXPECT_FALSE(quant::can_pack_rows8(t, 16, 512)) << ggml_type_name(t);
}

}  // namespace
}  // namespace vlkv
