#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q4_K, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ4_K);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q4_K");
  EXPECT_EQ(f->block_elems, 256);
  EXPECT_EQ(f->block_bytes, 144u);
  EXPECT_FALSE(row_bytes(GgmlType::kQ4_K, 128).is_ok());
  EXPECT_EQ(row_bytes(GgmlType::kQ4_K, 512).value(), 288u);
}

// Sub-block scales sc = {1,2,3,4,17,33,50,63} and mins m = {0,1,2,3,20,40,63,16}, packed:
//   bytes 0..3  = sc[j] | (sc[j+4] >> 4) << 6   -> 41 82 C3 C4
//   bytes 4..7  = m[j]  | (m[j+4] >> 4) << 6    -> 40 81 C2 43
//   bytes 8..11 = (sc[j+4] & 15) | (m[j+4] & 15) << 4 -> 41 81 F2 0F
// d = 1 (0x3C00), dmin = 0.5 (0x3800). qs[32c + l] = (l % 16) | (15 - l % 16) << 4, so
// sub-block 2c has codes l % 16 and sub-block 2c+1 has 15 - l % 16. w = d*sc*code - dmin*m.
TEST(Q4_K, KnownAnswerBlock) {
  std::vector<uint8_t> block = {0x00, 0x3C, 0x00, 0x38, 0x41, 0x82, 0xC3, 0xC4,
                                0x40, 0x81, 0xC2, 0x43, 0x41, 0x81, 0xF2, 0x0F};
  for (int i = 0; i < 128; ++i) block.push_back(static_cast<uint8_t>((i % 16) | (15 - i % 16) << 4));
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int m[8] = {0, 1, 2, 3, 20, 40, 63, 16};
  std::vector<float> expected(256);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, l = e % 32;
    const int code = s % 2 == 0 ? l % 16 : 15 - l % 16;
    expected[e] = static_cast<float>(sc[s] * code) - 0.5f * static_cast<float>(m[s]);
  }
  EXPECT_EQ(expected[0], 0.0f);
  EXPECT_EQ(expected[32 + 5], 19.5f);      // sub-block 1: code 10, 2*10 - 0.5*1
  EXPECT_EQ(expected[7 * 32 + 3], 748.0f);  // sub-block 7: code 12, 63*12 - 0.5*16
  expect_row_decodes(GgmlType::kQ4_K, block, expected);
}

// Our quantizer is our own RTN scale/min search (not llama-quantize's); on N(0,1) rows it
// lands at about 7.1% relative RMS error, like llama-quantize (the fixture README's table).
TEST(Q4_K, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ4_K, 0.085, quant_test::half_fields({0, 2})); }

}  // namespace
}  // namespace vlkv
