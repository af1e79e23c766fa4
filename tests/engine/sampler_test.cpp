// Sampler: greedy rules, the cut order of llama.cpp's chain, determinism per seed,
// and that draws follow the softmax distribution.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace vlkv {
namespace {

SamplerParams plain(float temperature, uint32_t seed = 7) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

TEST(SamplerParams, DefaultsAsLlamaCpp) {
  SamplerParams p;
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_TRUE(validate_sampler_params(p).is_ok());
}

TEST(SamplerParams, TableListsEveryFieldOnce) {
  SamplerParams p;
  std::vector<std::string> flags;
  std::vector<std::string> json_names;
  SamplerParams::visit(p, [&](auto& field, const ParamField& info) {
    flags.push_back(info.flags);
    json_names.push_back(info.json);
    EXPECT_GT(std::string(info.help).size(), 5u);
    // The default is inside the row's range.
    EXPECT_TRUE(check_param(info, static_cast<double>(field)).is_ok()) << info.json;
  });
  EXPECT_EQ(flags, (std::vector<std::string>{"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                                             "--repeat-last-n", "-s,--seed"}));
  EXPECT_EQ(json_names, (std::vector<std::string>{"temperature", "top_k", "top_p", "min_p", "repeat_penalty",
                                                  "repeat_last_n", "seed"}));
  // Writable through the table (the CLI sets fields this way).
  SamplerParams::visit(p, [](auto& field, const ParamField& info) {
    if (std::string(info.json) == "top_k") field = 5;
  });
  EXPECT_EQ(p.top_k, 5);
}

TEST(SamplerParams, RejectsAbsurdValues) {
  auto bad = [](auto mutate) {
    SamplerParams p;
    mutate(p);
    Status s = validate_sampler_params(p);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_FALSE(Sampler::create(p).is_ok());
  };
  bad([](SamplerParams& p) { p.top_p = 0.0f; });
  bad([](SamplerParams& p) { p.top_p = 1.5f; });
  bad([](SamplerParams& p) { p.min_p = -0.1f; });
  bad([](SamplerParams& p) { p.min_p = 2.0f; });
  bad([](SamplerParams& p) { p.repeat_penalty = 0.0f; });
  bad([](SamplerParams& p) { p.repeat_last_n = -2; });
  bad([](SamplerParams& p) { p.temperature = NAN; });
  bad([](SamplerParams& p) { p.top_p = NAN; });
  SamplerParams neg;
  neg.temperature = -1.0f;  // greedy, as llama.cpp
  EXPECT_TRUE(validate_sampler_params(neg).is_ok());
}

TEST(Sampler, GreedyPicksLowestIdOnTies) {
  const std::vector<float> logits = {0.1f, 3.0f, -2.0f, 3.0f, 3.0f};
  for (float temp : {0.0f, -1.0f}) {
    Sampler s(plain(temp));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits.data(), 5), 1);
  }
}

TEST(Sampler, TopKOneIsGreedy) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  SamplerParams p = plain(1.5f);
  p.top_k = 1;
  Sampler s(p);
  Sampler greedy(plain(0.0f));
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(100);
    for (auto& l : logits) l = dist(rng);
    EXPECT_EQ(s.sample(logits.data(), 100), greedy.sample(logits.data(), 100));
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 0.7f);
  auto run = [&](uint32_t seed) {
    Sampler s(plain(1.0f, seed));
    std::vector<TokenId> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.sample(logits.data(), 50));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  // reset() replays the same sequence.
  Sampler s(plain(1.0f, 42));
  const TokenId first = s.sample(logits.data(), 50);
  for (int i = 0; i < 10; ++i) s.sample(logits.data(), 50);
  s.reset();
  EXPECT_EQ(s.sample(logits.data(), 50), first);
}

// Pearson chi-square of n draws against probabilities q; with 5 categories (4 dof) the
// 99.9% quantile is 18.47.
double chi_square(const std::vector<int>& counts, const std::vector<double>& q, int n) {
  double chi = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    const double e = q[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(Sampler, DrawsFollowSoftmaxWithTemperature) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
  const float temp = 0.7f;
  std::vector<double> q(5);
  double z = 0;
  for (int i = 0; i < 5; ++i) z += q[i] = std::exp(logits[i] / temp);
  for (auto& v : q) v /= z;
  Sampler s(plain(temp, 1234));
  const int n = 40000;
  std::vector<int> counts(5);
  for (int i = 0; i < n; ++i) counts[s.sample(logits.data(), 5)]++;
  EXPECT_LT(chi_square(counts, q, n), 18.47);
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  // p at temp 1 ~ {0.643, 0.237, 0.087, 0.032}: top_p 0.8 keeps ids 0, 1 (0.643 < 0.8 <= 0.88).
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f};
  SamplerParams p = plain(1.0f, 5);
  p.top_p = 0.8f;
  Sampler s(p);
  std::vector<int> counts(4);
  for (int i = 0; i < 5000; ++i) counts[s.sample(logits.data(), 4)]++;
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 1000);  // renormalized: 0.237/0.88 = 0.27
  // min_p 0.3 keeps tokens with p >= 0.3 * p_max, i.e. logit >= 3 + ln 0.3 = 1.80: ids 0, 1.
  p = plain(1.0f, 6);
  p.min_p = 0.3f;
  Sampler m(p);
  std::fill(counts.begin(), counts.end(), 0);
  for (int i = 0; i < 5000; ++i) counts[m.sample(logits.data(), 4)]++;
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 1000);
  // top_k 3 on a high temperature never yields the 4th.
  p = plain(100.0f, 8);
  p.top_k = 3;
  Sampler k(p);
  for (int i = 0; i < 2000; ++i) EXPECT_NE(k.sample(logits.data(), 4), 3);
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  // Logits {2, -1, 1.9}: token 0 seen -> 2 / 2 = 1 < 1.9: greedy moves to 2.
  const std::vector<float> logits = {2.0f, -1.0f, 1.9f};
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  Sampler s(p);
  EXPECT_EQ(s.sample(logits.data(), 3), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data(), 3), 2);
  // After two more tokens, 0 falls out of the last-2 window.
  s.accept(1);
  s.accept(1);
  EXPECT_EQ(s.sample(logits.data(), 3), 0);
  // A negative logit is multiplied: -1 * 2 = -2, so token 1 stays below the others.
  // Check exactly through the distribution: with temp 1 and tokens {0: 0, 1: -1}, penalty 2
  // on token 1 gives p(1) = e^-2 / (1 + e^-2) = 0.119 instead of 0.269.
  const std::vector<float> two = {0.0f, -1.0f};
  SamplerParams q = plain(1.0f, 11);
  q.repeat_penalty = 2.0f;
  Sampler t(q);
  t.accept(1);
  t.accept(1);  // counted once, as llama.cpp
  int ones = 0;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ones += t.sample(two.data(), 2) == 1;
  const double expect = std::exp(-2.0) / (1.0 + std::exp(-2.0));
  EXPECT_NEAR(static_cast<double>(ones) / n, expect, 4 * std::sqrt(expect * (1 - expect) / n));
}

TEST(Sampler, ZeroWindowDisablesPenalty) {
  const std::vector<float> logits = {2.0f, 1.9f};
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 5.0f;
  p.repeat_last_n = 0;
  Sampler s(p);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data(), 2), 0);
}

}  // namespace
}  // namespace vlkv
