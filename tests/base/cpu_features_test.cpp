#include "base/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "base/simd_dispatch.h"

namespace vlkv {
namespace {

bool is_arm(SimdTier t) { return t == SimdTier::kNeon || t == SimdTier::kDotprod || t == SimdTier::kI8mm; }

TEST(SimdTiers, NamesAreDistinct) {
  std::set<std::string> names;
  for (int t = 0; t < kSimdTierCount; ++t) names.insert(simd_tier_name(static_cast<SimdTier>(t)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kSimdTierCount));
}

// Every chain ends at scalar and stays on its architecture (a table never hands an ARM
// CPU an x86 variant or the reverse).
TEST(SimdTiers, FallbackStaysOnItsArchitectureAndEndsAtScalar) {
  for (int i = 0; i < kSimdTierCount; ++i) {
    const SimdTier start = static_cast<SimdTier>(i);
    SimdTier t = start;
    for (int steps = 0; t != SimdTier::kScalar; ++steps) {
      ASSERT_LT(steps, kSimdTierCount) << simd_tier_name(start);
      t = simd_tier_fallback(t);
      if (t != SimdTier::kScalar) {
        EXPECT_EQ(is_arm(t), is_arm(start)) << simd_tier_name(start);
      }
    }
  }
}

TEST(SimdTiers, SupportedTiersAreOneArchitectures) {
  const std::vector<SimdTier> tiers = supported_simd_tiers();
  ASSERT_FALSE(tiers.empty());
  EXPECT_EQ(tiers[0], SimdTier::kScalar);
  std::string listed;
  for (SimdTier t : tiers) listed += std::string(" ") + simd_tier_name(t);
  std::printf("supported tiers:%s; running at %s\n", listed.c_str(), simd_tier_name(simd_tier_default()));
  bool any_arm = false, any_x86 = false;
  for (SimdTier t : tiers)
    if (t != SimdTier::kScalar) (is_arm(t) ? any_arm : any_x86) = true;
  EXPECT_FALSE(any_arm && any_x86) << listed;
#if defined(__aarch64__)
  EXPECT_TRUE(any_arm) << "every ARMv8-A Linux reports HWCAP_ASIMD";
#endif
  // make test-arm64 names the tier each emulated CPU must reach (QEMU_CPU=max: i8mm,
  // cortex-a72: neon), so a run that silently fell back to scalar fails here.
  if (const char* want = std::getenv("VLKV_EXPECT_TIER")) {
    if (std::getenv("VLKV_SIMD") == nullptr) {
      EXPECT_STREQ(simd_tier_name(simd_tier_default()), want);
    }
  }
}

struct Family {
  int id;
};

TEST(SimdTable, MissingTiersFallBackAlongTheirChain) {
  const Family scalar{0}, avx2{1}, avx512_vnni{2}, neon{3}, dotprod{4};
  const SimdTable<Family> t(
      {.scalar = &scalar, .avx2 = &avx2, .avx512_vnni = &avx512_vnni, .neon = &neon, .dotprod = &dotprod});
  EXPECT_EQ(t.at(SimdTier::kScalar).id, 0);
  EXPECT_EQ(t.at(SimdTier::kAvx2Vnni).id, 1);
  EXPECT_EQ(t.at(SimdTier::kAvx512).id, 1);
  EXPECT_EQ(t.at(SimdTier::kAvx512Vnni).id, 2);
  EXPECT_EQ(t.at(SimdTier::kNeon).id, 3);
  EXPECT_EQ(t.at(SimdTier::kI8mm).id, 4);
  const SimdTable<Family> only_scalar({.scalar = &scalar});
  for (int i = 0; i < kSimdTierCount; ++i) EXPECT_EQ(only_scalar.at(static_cast<SimdTier>(i)).id, 0);
}

}  // namespace
}  // namespace vlkv
