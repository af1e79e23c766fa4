#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q5_K, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ5_K);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q5_K");
  EXPECT_EQ(f->block_elems, 256);
  EXPECT_EQ(f->block_bytes, 176u);
}

// Scales and mins as in the Q4_K test (same 12 packed bytes), d = 1, dmin = 0.5.
// qh[l] = 0x55 for even l (bits 0,2,4,6: sub-blocks 0,2,4,6 get +16), 0xAA for odd l.
// qs as in Q4_K: sub-block 2c low nibbles l % 16, sub-block 2c+1 high nibbles 15 - l % 16.
TEST(Q5_K, KnownAnswerBlock) {
  std::vector<uint8_t> block = {0x00, 0x3C, 0x00, 0x38, 0x41, 0x82, 0xC3, 0xC4,
                                0x40, 0x81, 0xC2, 0x43, 0x41, 0x81, 0xF2, 0x0F};
  for (int l = 0; l < 32; ++l) block.push_back(l % 2 == 0 ? 0x55 : 0xAA);
  for (int i = 0; i < 128; ++i) block.push_back(static_cast<uint8_t>((i % 16) | (15 - i % 16) << 4));
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int m[8] = {0, 1, 2, 3, 20, 40, 63, 16};
  std::vector<float> expected(256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    const int code = (s % 2 == 0 ? l % 16 : 15 - l % 16) + ((s % 2) == (l % 2) ? 16 : 0);
    expected[e] = static_cast<float>(sc[s] * code) - 0.5f * static_cast<float>(m[s]);
  }
  EXPECT_EQ(expected[0], 16.0f);           // sub-block 0, l 0: code 0 + 16
  EXPECT_EQ(expected[32 + 5], 51.5f);      // sub-block 1, l 5 (odd): code 10 + 16, 2*26 - 0.5
  EXPECT_EQ(expected[7 * 32 + 2], 811.0f);  // sub-block 7, l 2 (even): code 13, 63*13 - 8
  expect_row_decodes(GgmlType::kQ5_K, block, expected);
}

TEST(Q5_K, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ5_K, 0.043, quant_test::half_fields({0, 2})); }

}  // namespace
}  // namespace vlkv
