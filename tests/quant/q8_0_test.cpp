#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q8_0, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ8_0);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q8_0");
  EXPECT_EQ(f->block_elems, 32);
  EXPECT_EQ(f->block_bytes, 34u);
}

// d = -0.25 (0xB400); qs[j] = 8j - 128 as int8: w = (8j - 128) * -0.25 = 32 - 2j.
TEST(Q8_0, KnownAnswerBlock) {
  std::vector<uint8_t> block = {0x00, 0xB4};
  for (int j = 0; j < 32; ++j) block.push_back(static_cast<uint8_t>(static_cast<int8_t>(8 * j - 128)));
  std::vector<float> expected(32);
  for (int j = 0; j < 32; ++j) expected[j] = static_cast<float>(32 - 2 * j);
  expect_row_decodes(GgmlType::kQ8_0, block, expected);
}

// amax 127 gives d = 1, and integer inputs are their own codes.
TEST(Q8_0, QuantizeKnownAnswer) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(127 - 8 * j);
  std::vector<uint8_t> q(34);
  find_weight_format(GgmlType::kQ8_0)->quantize_row_ref(x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x3C);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(static_cast<int8_t>(q[2 + j]), 127 - 8 * j) << j;
}

TEST(Q8_0, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ8_0, 0.0065, quant_test::half_fields({0})); }

}  // namespace
}  // namespace vlkv
