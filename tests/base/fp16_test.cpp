#include "base/fp16.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/cpu_features.h"

namespace vlkv {
namespace {

// The CPU's own conversions: F16C on x86-64, fcvt (__fp16) on ARM64.
#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hw_to_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hw_from_half(uint16_t h) { return _cvtsh_ss(h); }
bool hw_half() { return cpu_features().f16c; }
#elif defined(__aarch64__)
uint16_t hw_to_half(float f) {
  const __fp16 h = static_cast<__fp16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
float hw_from_half(uint16_t bits) {
  __fp16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}
bool hw_half() { return true; }
#else
uint16_t hw_to_half(float) { return 0; }
float hw_from_half(uint16_t) { return 0.0f; }
bool hw_half() { return false; }
#endif

// Every half value converts exactly; f32 -> f16 rounds to nearest even as the
// CPU's conversion does, checked on all halves and on values between them.
TEST(Fp16, MatchesF16cExhaustively) {
  if (!hw_half()) GTEST_SKIP() << "no hardware half conversion on this CPU";
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
