#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q5_1, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ5_1);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q5_1");
  EXPECT_EQ(f->block_elems, 32);
  EXPECT_EQ(f->block_bytes, 24u);
}

// d = 0.25 (0x3400), m = 0.5 (0x3800), qh = 0x0000FFFF (weights 0..15 have bit 4),
// qs[j] = j | (15 - j) << 4. Weight e < 16: code e + 16; e >= 16: code 31 - e;
// w = code * 0.25 + 0.5.
TEST(Q5_1, KnownAnswerBlock) {
  std::vector<uint8_t> block = {0x00, 0x34, 0x00, 0x38, 0xFF, 0xFF, 0x00, 0x00};
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  std::vector<float> expected(32);
  for (int e = 0; e < 32; ++e) {
    const int code = e < 16 ? e + 16 : 31 - e;
    expected[e] = static_cast<float>(code) * 0.25f + 0.5f;
  }
  EXPECT_EQ(expected[15], 8.25f);
  EXPECT_EQ(expected[31], 0.5f);
  expect_row_decodes(GgmlType::kQ5_1, block, expected);
}

// min -2, max 1.875: d = 3.875 / 31 = 0.125, codes (x + 2) * 8 = j.
TEST(Q5_1, QuantizeKnownAnswer) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = -2.0f + 0.125f * static_cast<float>(j);
  std::vector<uint8_t> q(24);
  find_weight_format(GgmlType::kQ5_1)->quantize_row_ref(x.data(), q.data(), 32);
  const std::vector<uint8_t> head = {0x00, 0x30, 0x00, 0xC0, 0x00, 0x00, 0xFF, 0xFF};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q[i], head[i]) << i;
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[8 + j], j | j << 4) << j;
}

TEST(Q5_1, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ5_1, 0.046, quant_test::half_fields({0, 2})); }

}  // namespace
}  // namespace vlkv
