#include "quant/weight_format.h"

#include "quant_test_util.h"

namespace vlkv {
namespace {

using quant_test::expect_row_decodes;

TEST(F32, Layout) {
  const WeightFormat* f = find_weight_format(GgmlType::kF32);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->name, "f32");
  EXPECT_EQ(f->block_elems, 1);
  EXPECT_EQ(f->block_bytes, 4u);
}

TEST(F32, KnownAnswer) {
  std::vector<float> expected;
  for (int i = 0; i < 37; ++i) expected.push_back(static_cast<float>(i * i) * 0.125f - 3.0f);
  std::vector<uint8_t> bytes(expected.size() * 4);
  std::memcpy(bytes.data(), expected.data(), bytes.size());
  expect_row_decodes(GgmlType::kF32, bytes, expected);
}

// Random bits with the exponent kept below 0xFF (no inf/nan) and not huge, so products stay finite.
void finite_f32(uint8_t* p, std::mt19937& rng) {
  uint32_t v = rng();
  v = (v & 0x807FFFFFu) | ((v >> 23 & 0xFFu) % 200u) << 23;
  std::memcpy(p, &v, 4);
}

TEST(F32, StandardChecks) { quant_test::run_standard_checks(GgmlType::kF32, 0.0, finite_f32); }

}  // namespace
}  // namespace vlkv
