#include "base/fp16.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <immintrin.h>

#include "base/cpu_features.h"

namespace vlkv {
namespace {

__attribute__((target("f16c"))) uint16_t hw_to_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hw_from_half(uint16_t h) { return _cvtsh_ss(h); }

// Every half value converts exactly; f32 -> f16 rounds to nearest even as the
// F16C instruction does, checked on all halves and on values between them.
TEST(Fp16, MatchesF16cExhaustively) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = hw_from_half(static_cast<uint16_t>(h));
    const float ours = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(ours));
      continue;
    }
    ASSERT_EQ(std::memcmp(&f, &ours, 4), 0) << h;
    ASSERT_EQ(fp32_to_fp16(f), hw_to_half(f)) << h;
    // Midpoints and near-midpoints between consecutive halves.
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    for (int d : {-4097, -4096, -4095, -1, 1, 4095, 4096, 4097}) {
      uint32_t b2 = bits + d;
      float g;
      std::memcpy(&g, &b2, 4);
      if (std::isnan(g)) continue;
      ASSERT_EQ(fp32_to_fp16(g), hw_to_half(g)) << std::hex << b2;
    }
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_FLOAT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  uint32_t bits = 0x3f808000;  // exactly halfway between 0x3f80 and 0x3f81 -> even (0x3f80)
  float f;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(fp32_to_bf16(f), 0x3f80);
  bits = 0x3f818000;  // halfway between 0x3f81 and 0x3f82 -> even (0x3f82)
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(fp32_to_bf16(f), 0x3f82);
}

}  // namespace
}  // namespace vlkv
