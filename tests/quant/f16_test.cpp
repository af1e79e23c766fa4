#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(F16, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kF16);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "f16");
  EXPECT_EQ(f->block_elems, 1);
  EXPECT_EQ(f->block_bytes, 2u);
  EXPECT_EQ(row_bytes(GgmlType::kF16, 7).value(), 14u);
}

// 1.0 = 0x3C00, -2 = 0xC000, the smallest subnormal 0x0001 = 2^-24, the largest 0x7BFF = 65504,
// 0x3555 = 0.333251953125, repeated to 19 values so every fast path has a tail.
TEST(F16, KnownAnswer) {
  const uint8_t v[5][2] = {{0x00, 0x3C}, {0x00, 0xC0}, {0x01, 0x00}, {0xFF, 0x7B}, {0x55, 0x35}};
  const float f[5] = {1.0f, -2.0f, 5.9604644775390625e-8f, 65504.0f, 0.333251953125f};
  std::vector<uint8_t> bytes;
  std::vector<float> expected;
  for (int i = 0; i < 19; ++i) {
    bytes.push_back(v[i % 5][0]);
    bytes.push_back(v[i % 5][1]);
    expected.push_back(f[i % 5]);
  }
  expect_row_decodes(GgmlType::kF16, bytes, expected);
}

TEST(F16, StandardChecks) { quant_test::run_standard_checks(GgmlType::kF16, 2.5e-4, quant_test::half_fields({0})); }

}  // namespace
}  // namespace vlkv
