#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(BF16, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kBF16);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "bf16");
  EXPECT_EQ(f->block_elems, 1);
  EXPECT_EQ(f->block_bytes, 2u);
}

// bf16 is the top half of an f32: 0x3F80 = 1, 0xBF80 = -1, 0x4049 = 3.140625, 0x0001 = 2^-133.
TEST(BF16, KnownAnswer) {
  const uint8_t v[4][2] = {{0x80, 0x3F}, {0x80, 0xBF}, {0x49, 0x40}, {0x01, 0x00}};
  const float f[4] = {1.0f, -1.0f, 3.140625f, std::ldexp(1.0f, -133)};
  std::vector<uint8_t> bytes;
  std::vector<float> expected;
  for (int i = 0; i < 23; ++i) {
    bytes.push_back(v[i % 4][0]);
    bytes.push_back(v[i % 4][1]);
    expected.push_back(f[i % 4]);
  }
  expect_row_decodes(GgmlType::kBF16, bytes, expected);
}

// Round to nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to 1.
TEST(BF16, QuantizeRoundsToNearestEven) {
  const float x[2] = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8)};
  uint8_t q[4];
  find_weight_format(GgmlType::kBF16)->quantize_row_ref(x, q, 2);
  EXPECT_EQ(q[0], 0x80);
  EXPECT_EQ(q[1], 0x3F);
  EXPECT_EQ(q[2], 0x82);  // 1 + 3*2^-8 is halfway to 1 + 2^-6 (even): 0x3F82
  EXPECT_EQ(q[3], 0x3F);
}

// Random bf16 bits with the exponent field below 200 (no inf/nan, and sums stay finite in f32).
void finite_bf16(uint8_t* p, std::mt19937& rng) {
  const uint32_t r = rng();
  const auto h = static_cast<uint16_t>((r & 0x807Fu) | ((r >> 16) % 200u) << 7);
  std::memcpy(p, &h, 2);
}

TEST(BF16, StandardChecks) { quant_test::run_standard_checks(GgmlType::kBF16, 2e-3, finite_bf16); }

}  // namespace
}  // namespace vlkv
