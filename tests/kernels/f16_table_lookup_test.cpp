// The vectorized f16-table lookup (gelu / gelu_quick as ggml's CPU ops) against its scalar
// reference, bit for bit at every SIMD tier: the f16 rounding of the input must pick the
// same table entry, ties to even, subnormals, the +-10 bounds and ragged tails included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "base/simd_dispatch.h"
#include "kernels/f16_table_lookup.h"

namespace vlkv {
namespace {

class F16TableLookup : public ::testing::Test {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

std::vector<float> hard_inputs() {
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(v)) continue;
    x.push_back(v);
    // Halfway to the next f16 up (a tie: rounds to even) and just either side of it.
    const float next = fp16_to_fp32(static_cast<uint16_t>(h + 1));
    if ((h & 0x7fffu) < 0x7bffu && std::isfinite(next)) {
      const float mid = 0.5f * (v + next);
      x.push_back(mid);
      x.push_back(std::nextafter(mid, v));
      x.push_back(std::nextafter(mid, next));
    }
  }
  for (float v : {-10.0f, 10.0f, std::nextafter(-10.0f, 0.0f), std::nextafter(10.0f, 0.0f), 1e-30f, -1e-30f,
                  65519.0f, 65520.0f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()})
    x.push_back(v);
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 6.0f);
  for (int i = 0; i < 4099; ++i) x.push_back(d(rng));  // the count leaves a ragged tail
  return x;
}

TEST_F(F16TableLookup, EveryTierEqualsTheScalarReferenceBitForBit) {
  std::vector<float> table(65536);
  for (uint32_t i = 0; i < 65536; ++i) table[i] = static_cast<float>(i) * 0.5f - 7.0f;  // distinct per index
  const std::vector<float> x = hard_inputs();
  const int64_t n = static_cast<int64_t>(x.size());
  for (bool clamp : {false, true}) {
    std::vector<float> ref(x.size());
    f16_table_lookup_scalar(table.data(), x.data(), n, ref.data(), clamp);
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      for (int64_t len : {n, int64_t{1}, int64_t{15}, int64_t{17}}) {  // tails below one vector
        std::vector<float> out(static_cast<size_t>(len), -1.0f);
        f16_table_lookup(table.data(), x.data(), len, out.data(), clamp);
        for (int64_t i = 0; i < len; ++i)
          ASSERT_EQ(std::memcmp(&out[i], &ref[i], sizeof(float)), 0)
              << simd_tier_name(tier) << " clamp=" << clamp << " x=" << x[i] << " got " << out[i] << " want "
              << ref[i];
      }
      std::vector<float> in_place(x);  // out aliasing x
      f16_table_lookup(table.data(), in_place.data(), n, in_place.data(), clamp);
      ASSERT_EQ(std::memcmp(in_place.data(), ref.data(), sizeof(float) * x.size()), 0) << simd_tier_name(tier);
    }
  }
}

TEST_F(F16TableLookup, ClampFollowsGgmlGeluBounds) {
  std::vector<float> table(65536, 3.0f);
  const float x[] = {-10.5f, -10.0f, -9.99f, 9.99f, 10.0f, 11.0f};
  float out[6];
  f16_table_lookup_scalar(table.data(), x, 6, out, true);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(out[3], 3.0f);
  EXPECT_EQ(out[4], 10.0f);
  EXPECT_EQ(out[5], 11.0f);
}

}  // namespace
}  // namespace vlkv
