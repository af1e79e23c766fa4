#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q5_0, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ5_0);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q5_0");
  EXPECT_EQ(f->block_elems, 32);
  EXPECT_EQ(f->block_bytes, 22u);
}

// d = 2 (0x4000); qh = 0xAAAAAAAA: odd weights have bit 4 set; qs[j] = j | (15 - j) << 4.
// Weight e: low 4 bits e (e < 16) or 31 - e (e >= 16), plus 16 if e is odd; w = (code - 16) * 2.
TEST(Q5_0, KnownAnswerBlock) {
  std::vector<uint8_t> block = {0x00, 0x40, 0xAA, 0xAA, 0xAA, 0xAA};
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  std::vector<float> expected(32);
  for (int e = 0; e < 32; ++e) {
    const int code = (e < 16 ? e : 31 - e) + (e % 2 ? 16 : 0);
    expected[e] = static_cast<float>(code - 16) * 2.0f;
  }
  EXPECT_EQ(expected[0], -32.0f);  // code 0
  EXPECT_EQ(expected[17], 28.0f);  // low bits 14, high bit set: code 30
  expect_row_decodes(GgmlType::kQ5_0, block, expected);
}

// Largest magnitude -4 becomes code 0: d = 0.25 and codes are j (0..31); the fifth bits
// of weights 16..31 are set, so qh = 0xFFFF0000.
TEST(Q5_0, QuantizeKnownAnswer) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.25f;
  std::vector<uint8_t> q(22);
  find_weight_format(GgmlType::kQ5_0)->quantize_row_ref(x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x34);
  EXPECT_EQ(q[2], 0x00);
  EXPECT_EQ(q[3], 0x00);
  EXPECT_EQ(q[4], 0xFF);
  EXPECT_EQ(q[5], 0xFF);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[6 + j], j | j << 4) << j;
}

TEST(Q5_0, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ5_0, 0.05, quant_test::half_fields({0})); }

}  // namespace
}  // namespace vlkv
