#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q4_1, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ4_1);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q4_1");
  EXPECT_EQ(f->block_elems, 32);
  EXPECT_EQ(f->block_bytes, 20u);
}

// d = 0.5 (0x3800), m = -1 (0xBC00); qs[j] = j | (15 - j) << 4.
// Weight j = j * 0.5 - 1, weight j + 16 = (15 - j) * 0.5 - 1.
TEST(Q4_1, KnownAnswerBlock) {
  std::vector<uint8_t> block = {0x00, 0x38, 0x00, 0xBC};
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  std::vector<float> expected(32);
  for (int j = 0; j < 16; ++j) {
    expected[j] = static_cast<float>(j) * 0.5f - 1.0f;
    expected[j + 16] = static_cast<float>(15 - j) * 0.5f - 1.0f;
  }
  EXPECT_EQ(expected[16], 6.5f);
  expect_row_decodes(GgmlType::kQ4_1, block, expected);
}

// min 1, max 8.5: d = 7.5 / 15 = 0.5, codes (x - 1) * 2 = j % 16 exactly.
TEST(Q4_1, QuantizeKnownAnswer) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 1.0f + 0.5f * static_cast<float>(j % 16);
  std::vector<uint8_t> q(20);
  find_weight_format(GgmlType::kQ4_1)->quantize_row_ref(x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x38);  // d 0.5
  EXPECT_EQ(q[2], 0x00);
  EXPECT_EQ(q[3], 0x3C);  // m 1.0
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[4 + j], j | j << 4) << j;
}

TEST(Q4_1, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ4_1, 0.095, quant_test::half_fields({0, 2})); }

}  // namespace
}  // namespace vlkv
