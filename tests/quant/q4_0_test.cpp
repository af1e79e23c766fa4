#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q4_0, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ4_0);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q4_0");
  EXPECT_EQ(f->block_elems, 32);
  EXPECT_EQ(f->block_bytes, 18u);
}

// d = 0.5 (f16 0x3800); qs[j] = j | (15 - j) << 4. Weight j is (j - 8) * 0.5 (low nibble),
// weight j + 16 is ((15 - j) - 8) * 0.5 (high nibble).
TEST(Q4_0, KnownAnswerBlock) {
  std::vector<uint8_t> block(18);
  block[0] = 0x00;
  block[1] = 0x38;
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<float> expected(32);
  for (int j = 0; j < 16; ++j) {
    expected[j] = static_cast<float>(j - 8) * 0.5f;
    expected[j + 16] = static_cast<float>(7 - j) * 0.5f;
  }
  EXPECT_EQ(expected[0], -4.0f);
  EXPECT_EQ(expected[16], 3.5f);
  expect_row_decodes(GgmlType::kQ4_0, block, expected);
}

// ggml's rule: the value of largest magnitude (-2 here) becomes code 0, so d = -2 / -8 = 0.25
// and x = (code - 8) * 0.25 exactly: codes are j % 16.
TEST(Q4_0, QuantizeKnownAnswer) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16 - 8) * 0.25f;
  std::vector<uint8_t> q(18);
  find_weight_format(GgmlType::kQ4_0)->quantize_row_ref(x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x34);  // 0.25
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[2 + j], j | j << 4) << j;
}

TEST(Q4_0, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ4_0, 0.10, quant_test::half_fields({0})); }

}  // namespace
}  // namespace vlkv
