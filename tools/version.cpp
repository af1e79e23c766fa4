#include "version.h"

#include "base/cpu_features.h"

namespace vlkv::cli {

extern const char* const kBuildCommitCount;  // generated/build_commit.cpp
extern const char* const kBuildCommit;

std::string version_text() {
  std::string tiers;
  for (SimdTier t : supported_simd_tiers()) tiers += std::string(tiers.empty() ? "" : " ") + simd_tier_name(t);
  return std::string("vlkv version ") + kBuildCommitCount + " (" + kBuildCommit + ")\nSIMD: " +
         simd_tier_name(simd_tier()) + " (this CPU: " + tiers + "; VLKV_SIMD=TIER caps it)";
}

}  // namespace vlkv::cli
