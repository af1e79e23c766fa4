// Decoder ops against hand-computed values and double-precision references.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace vlkv {
namespace {

std::vector<float> random_vector(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(RmsNorm, MatchesDoubleReference) {
  for (int64_t n : {1, 7, 64, 4096}) {
    const auto x = random_vector(n, 1, 3.0f);
    const auto w = random_vector(n, 2);
    std::vector<float> out(n);
    const float eps = 1e-6f;
    rms_norm(x.data(), w.data(), n, eps, out.data());
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], x[i] * scale * w[i], 1e-5 * std::fabs(x[i] * scale * w[i]) + 1e-7);
  }
}

TEST(RmsNorm, KnownValue) {
  const float x[4] = {1, 2, 3, 4};  // mean square 7.5
  const float w[4] = {1, 1, 2, 0.5f};
  float out[4];
  rms_norm(x, w, 4, 0.0f, out);
  const double s = 1.0 / std::sqrt(7.5);
  EXPECT_NEAR(out[0], 1 * s, 1e-6);
  EXPECT_NEAR(out[2], 6 * s, 1e-6);
  EXPECT_NEAR(out[3], 2 * s, 1e-6);
}

TEST(Swiglu, MatchesDoubleReference) {
  const auto g = random_vector(1000, 3, 4.0f);
  const auto u = random_vector(1000, 4);
  std::vector<float> out(1000);
  swiglu(g.data(), u.data(), 1000, out.data());
  for (int i = 0; i < 1000; ++i) {
    const double silu = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
    EXPECT_NEAR(out[i], silu * u[i], 1e-6 * std::fabs(silu * u[i]) + 1e-7);
  }
  // Large |g| must not produce nan: silu(-100) = -0, silu(100) = 100.
  const float gg[2] = {-100.0f, 100.0f}, uu[2] = {1.0f, 1.0f};
  float o[2];
  swiglu(gg, uu, 2, o);
  EXPECT_NEAR(o[0], 0.0f, 1e-30);
  EXPECT_EQ(o[1], 100.0f);
}

TEST(AddInplace, Adds) {
  std::vector<float> y = {1, 2, 3}, x = {0.5f, -2, 10};
  add_inplace(y.data(), x.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{1.5f, 0, 13}));
}

TEST(Softmax, MatchesDoubleReferenceAndSumsToOne) {
  auto x = random_vector(5000, 5, 10.0f);
  const auto orig = x;
  softmax(x.data(), static_cast<int64_t>(x.size()));
  double mx = -1e30, sum = 0, total = 0;
  for (float v : orig) mx = std::max<double>(mx, v);
  for (float v : orig) sum += std::exp(v - mx);
  for (size_t i = 0; i < x.size(); ++i) {
    const double p = std::exp(orig[i] - mx) / sum;
    EXPECT_NEAR(x[i], p, 1e-6 * p + 1e-12);
    total += x[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(Softmax, HugeLogitsAndMinusInfinity) {
  float x[3] = {1000.0f, 1000.0f, -INFINITY};
  softmax(x, 3);
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_FLOAT_EQ(x[1], 0.5f);
  EXPECT_EQ(x[2], 0.0f);
}

TEST(Rope, KnownValueNormal) {
  // head_dim 4, base 10000: theta_scale = 10000^(-1/2) = 0.01, so angles are pos and pos/100.
  float x[4] = {1, 0, 0, 1};
  RopeParams p;
  p.n_rot = 4;
  rope(x, 1, 4, 1, p);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[2], -std::sin(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::cos(0.01), 1e-6);
}

TEST(Rope, KnownValueNeoxAndPassThrough) {
  // NeoX pairs (x[i], x[i + n_rot/2]); dims past n_rot untouched. freq_scale halves angles.
  float x[6] = {1, 0, 0, 1, 7, -7};
  RopeParams p;
  p.style = RopeStyle::kNeox;
  p.n_rot = 4;
  p.freq_scale = 0.5f;
  rope(x, 1, 6, 2, p);  // angles: 2 * 0.5 = 1 and 0.01
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[1], -std::sin(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::cos(0.01), 1e-6);
  EXPECT_EQ(x[4], 7.0f);
  EXPECT_EQ(x[5], -7.0f);
}

TEST(Rope, PositionZeroIsIdentityAndNormPreserved) {
  const auto orig = random_vector(2 * 64, 6);
  auto x = orig;
  RopeParams p;
  p.n_rot = 64;
  rope(x.data(), 2, 64, 0, p);
  EXPECT_EQ(x, orig);
  rope(x.data(), 2, 64, 12345, p);
  double n0 = 0, n1 = 0;
  for (size_t i = 0; i < x.size(); ++i) n0 += orig[i] * orig[i], n1 += x[i] * x[i];
  EXPECT_NEAR(n1, n0, 1e-4 * n0);
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(Rope, ScoreDependsOnlyOnRelativePosition) {
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    RopeParams p;
    p.style = style;
    p.n_rot = 64;
    p.freq_base = 10000.0f;
    const auto q = random_vector(128, 7), k = random_vector(128, 8);
    auto score = [&](int64_t m, int64_t n) {
      auto qq = q, kk = k;
      rope(qq.data(), 1, 128, m, p);
      rope(kk.data(), 1, 128, n, p);
      return dot(qq, kk);
    };
    const double s = score(10, 3);
    EXPECT_NEAR(score(17, 10), s, 1e-4 * std::fabs(s) + 1e-4);
    EXPECT_NEAR(score(107, 100), s, 1e-4 * std::fabs(s) + 1e-4);
    EXPECT_NEAR(score(1007, 1000), s, 1e-3 * std::fabs(s) + 1e-3);  // float angles lose bits
    // and it does depend on the offset
    EXPECT_GT(std::fabs(score(11, 3) - s), 1e-3);
  }
}

TEST(Rope, NeoxIsNormalOnPermutedDims) {
  // NeoX on x equals normal RoPE on the interleaved permutation of x.
  const int d = 16;
  const auto x = random_vector(d, 9);
  std::vector<float> inter(d);
  for (int i = 0; i < d / 2; ++i) inter[2 * i] = x[i], inter[2 * i + 1] = x[i + d / 2];
  RopeParams p;
  p.n_rot = d;
  auto a = x;
  p.style = RopeStyle::kNeox;
  rope(a.data(), 1, d, 42, p);
  p.style = RopeStyle::kNormal;
  rope(inter.data(), 1, d, 42, p);
  for (int i = 0; i < d / 2; ++i) {
    EXPECT_EQ(a[i], inter[2 * i]);
    EXPECT_EQ(a[i + d / 2], inter[2 * i + 1]);
  }
}

TEST(Rope, AnglesFollowGgmlFloatRecurrence) {
  // theta for pair i is pos * theta_scale^i accumulated in float (ggml_rope_cache_init),
  // not pow(base, -2i/n_rot) in double; check pair 20 of a 128-dim head at pos 3000 bit-exactly.
  const int d = 128;
  std::vector<float> x(d, 0.0f);
  x[40] = 1.0f;  // pair 20, first element
  RopeParams p;
  p.n_rot = d;
  p.freq_base = 1000000.0f;
  rope(x.data(), 1, d, 3000, p);
  const float theta_scale = std::pow(1000000.0f, -2.0f / d);
  float theta = 3000.0f;
  for (int i = 0; i < 20; ++i) theta *= theta_scale;
  EXPECT_EQ(x[40], std::cos(theta));
  EXPECT_EQ(x[41], std::sin(theta));
}

}  // namespace
}  // namespace vlkv
