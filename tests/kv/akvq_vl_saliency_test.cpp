// AKVQ-VL's saliency logic (akvq_vl/saliency.h) on hand-made attention masses: kind runs,
// top-k, pattern detection (TSA / PSA) and pivot selection within a budget.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "akvq_test_util.h"
#include "kv/methods/akvq_vl/saliency.h"

namespace vlkv {
namespace {

using akvq::KindRuns;
using akvq::MassShares;
using akvq::Pattern;
using namespace akvqtest;

TEST(AkvqSaliency, KindRunsAppendAndLookup) {
  const auto kinds = kinds_of({{kS, 1}, {kT, 4}, {kV, 10}, {kT, 3}});
  KindRuns r = runs_of(kinds);
  EXPECT_EQ(r.size(), 18);
  EXPECT_EQ(r.n_runs(), 4u);
  for (int t = 0; t < 18; ++t) EXPECT_EQ(r.at(t), kinds[t]) << t;
  KindRuns part;
  part.append(r, 3, 16);  // T T V*10 T
  part.append(r, 0, 1);   // S
  EXPECT_EQ(part.size(), 14);
  EXPECT_EQ(part.n_runs(), 4u);
  EXPECT_EQ(part.at(1), kT);
  EXPECT_EQ(part.at(2), kV);
  EXPECT_EQ(part.at(12), kT);
  EXPECT_EQ(part.at(13), kS);
}

TEST(AkvqSaliency, TopKLargestFirstTiesEarlierNanLast) {
  const std::vector<float> x = {1, 5, NAN, 5, 3, 9, 0};
  EXPECT_EQ(akvq::top_k(x.data(), 7, 3), (std::vector<int64_t>{5, 1, 3}));
  EXPECT_EQ(akvq::top_k(x.data(), 7, 0).size(), 0u);
  EXPECT_EQ(akvq::top_k(x.data(), 7, 100).back(), 2);  // NaN last
}

TEST(AkvqSaliency, TextSalientLayerIsTsa) {
  // 60 text tokens sharing the attention, 200 visual tokens with little: the top 16
  // (pivots) hold 16/73 of the mass, the other text tokens 44/73.
  const auto kinds = kinds_of({{kT, 30}, {kV, 200}, {kT, 30}});
  auto m = flat_mass(kinds, 1.0f, 0.065f);
  MassShares s;
  s.add_head(m.data(), static_cast<int64_t>(m.size()), runs_of(kinds), 16);
  EXPECT_NEAR(s.pivot / s.total, 16.0 / 73.0, 1e-4);
  EXPECT_NEAR(s.text / s.total, 44.0 / 73.0, 1e-4);
  EXPECT_EQ(akvq::detect_pattern(s), Pattern::kTsa);
}

TEST(AkvqSaliency, SinkLayerIsPsaEvenWhenTheSinkIsText) {
  const auto kinds = kinds_of({{kT, 30}, {kV, 200}, {kT, 30}});
  auto m = flat_mass(kinds, 0.3f, 0.3f);
  m[0] = 100.0f;  // BOS: the sink
  MassShares s;
  s.add_head(m.data(), static_cast<int64_t>(m.size()), runs_of(kinds), 16);
  EXPECT_GT(s.pivot, s.text);
  EXPECT_EQ(akvq::detect_pattern(s), Pattern::kPsa);
  // Summed over heads: a second head with spread text attention does not outweigh it.
  auto m2 = flat_mass(kinds, 1.0f, 0.0f);
  s.add_head(m2.data(), static_cast<int64_t>(m2.size()), runs_of(kinds), 16);
  EXPECT_EQ(akvq::detect_pattern(s), Pattern::kPsa);
}

TEST(AkvqSaliency, TextOnlyIsPsaAndNoMassIsNoDecision) {
  const auto kinds = kinds_of({{kT, 100}});
  auto m = flat_mass(kinds, 1.0f, 0.0f);  // spread over text: TSA if there were visual tokens
  MassShares s;
  s.add_head(m.data(), 100, runs_of(kinds), 16);
  EXPECT_GT(s.text, s.pivot);
  EXPECT_EQ(akvq::detect_pattern(s), Pattern::kPsa);
  std::vector<float> zero(100, 0.0f);
  zero[3] = NAN;
  zero[4] = -1.0f;
  MassShares z;
  z.add_head(zero.data(), 100, runs_of(kinds), 16);
  EXPECT_FALSE(akvq::detect_pattern(z).has_value());
}

TEST(AkvqSaliency, PivotsAreTopMassCandidatesWithinTheBudget) {
  // 20 keys; keys 0..9 folded (not candidates), 10..19 full precision as rows 0..9.
  std::vector<float> mass(20, 0.1f);
  mass[2] = 9;   // top, but folded
  mass[12] = 8;
  mass[17] = 7;
  mass[15] = 6;
  mass[19] = 0;  // never a pivot: no mass
  const std::vector<akvq::KeyRange> ranges = {{10, 0, 10}};
  std::vector<uint8_t> flags(10, 0);
  flags[5] = 1;  // key 15 is a pivot already
  EXPECT_EQ(akvq::select_pivots(mass.data(), 20, ranges, 4, 2, flags.data()), 2);
  EXPECT_EQ(flags, (std::vector<uint8_t>{0, 0, 1, 0, 0, 1, 0, 1, 0, 0}));
  std::vector<uint8_t> f1(10, 0);
  EXPECT_EQ(akvq::select_pivots(mass.data(), 20, ranges, 4, 1, f1.data()), 1);  // budget 1: the largest
  EXPECT_EQ(f1[2], 1);
  std::vector<uint8_t> f2(10, 0);
  // Only the top n_pivots of all keys qualify: with 2, keys 2 and 12.
  EXPECT_EQ(akvq::select_pivots(mass.data(), 20, ranges, 2, 2, f2.data()), 1);
  // Two ranges (window rows, then new rows) map keys to rows.
  std::vector<uint8_t> f3(6, 0);
  EXPECT_EQ(akvq::select_pivots(mass.data(), 20, {{2, 0, 1}, {17, 1, 3}}, 3, 3, f3.data()), 2);
  EXPECT_EQ(f3, (std::vector<uint8_t>{1, 1, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace vlkv
