#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(Q6_K, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kQ6_K);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "q6_K");
  EXPECT_EQ(f->block_elems, 256);
  EXPECT_EQ(f->block_bytes, 210u);
}

// ql[i] = i, qh[i] = 3i mod 256, scales {1,-1,2,-2,...,7,-7,127,-128}, d = 0.5 (0x3800).
// Weight e: half h = e / 128, quarter k = (e % 128) / 32, l = e % 32; low 4 bits from
// ql[64h + 32(k & 1) + l] (low nibble if k < 2, else high), top 2 bits (qh[32h + l] >> 2k) & 3;
// w = (d * scales[8h + 2k + l / 16]) * (code - 32).
TEST(Q6_K, KnownAnswerBlock) {
  std::vector<uint8_t> block(210);
  int8_t sc[16];
  for (int i = 0; i < 16; ++i) sc[i] = static_cast<int8_t>(i % 2 ? -(i / 2 + 1) : i / 2 + 1);
  sc[14] = 127;
  sc[15] = -128;
  for (int i = 0; i < 128; ++i) block[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 64; ++i) block[128 + i] = static_cast<uint8_t>(3 * i);
  for (int i = 0; i < 16; ++i) block[192 + i] = static_cast<uint8_t>(sc[i]);
  block[208] = 0x00;
  block[209] = 0x38;
  std::vector<float> expected(256);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int ql = block[64 * h + 32 * (k & 1) + l];
    const int low = k < 2 ? ql & 0xF : ql >> 4;
    const int top = (block[128 + 32 * h + l] >> (2 * k)) & 3;
    expected[e] = 0.5f * static_cast<float>(sc[8 * h + 2 * k + l / 16]) * static_cast<float>((low | top << 4) - 32);
  }
  EXPECT_EQ(expected[0], -16.0f);  // code 0, scale 1
  // e = 200: h 1, k 2, l 8: ql[72] = 0x48 -> 4; qh[40] = 120 -> (120 >> 4) & 3 = 3; code 52;
  // scale index 12 -> 7: 0.5 * 7 * 20 = 70.
  EXPECT_EQ(expected[200], 70.0f);
  expect_row_decodes(GgmlType::kQ6_K, block, expected);
}

TEST(Q6_K, StandardChecks) { quant_test::run_standard_checks(GgmlType::kQ6_K, 0.021, quant_test::half_fields({208})); }

}  // namespace
}  // namespace vlkv
