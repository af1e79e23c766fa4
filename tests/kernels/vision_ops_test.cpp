// Kernels added for the vision path and M-RoPE: layer_norm, ggml's table GELUs,
// rope_multi (text M-RoPE) and rope_vision (Qwen2-VL ViT 2D RoPE), each against a
// double-precision reference of its formula.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace vlkv {
namespace {

std::vector<float> random_vec(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(LayerNorm, MatchesDoubleReferenceAndWorksInPlace) {
  const int64_t n = 77;
  std::vector<float> x = random_vec(n, 1, 3.0f), w = random_vec(n, 2), b = random_vec(n, 3);
  for (float& v : x) v += 5.0f;  // a large mean: the centred variance must still be right
  double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= n;
  for (float v : x) var += (v - mean) * (v - mean);
  var /= n;
  std::vector<float> out(n);
  layer_norm(x.data(), w.data(), b.data(), n, 1e-6f, out.data());
  for (int64_t i = 0; i < n; ++i) {
    const double ref = (x[i] - mean) / std::sqrt(var + 1e-6) * w[i] + b[i];
    EXPECT_NEAR(out[i], ref, 1e-5 * (1 + std::fabs(ref))) << i;
  }
  std::vector<float> in_place = x;
  layer_norm(in_place.data(), w.data(), b.data(), n, 1e-6f, in_place.data());
  EXPECT_EQ(in_place, out);
  // Null weight and bias mean 1 and 0.
  layer_norm(x.data(), nullptr, nullptr, n, 1e-6f, out.data());
  double s = 0;
  for (float v : out) s += v;
  EXPECT_NEAR(s / n, 0.0, 1e-6);
}

TEST(Gelu, TableFollowsFormulaWithinF16Rounding) {
  std::vector<float> x = random_vec(4096, 4, 4.0f);
  x.push_back(-12.0f);
  x.push_back(12.5f);
  x.push_back(0.0f);
  std::vector<float> t(x.size()), e(x.size()), qt(x.size()), qe(x.size());
  gelu(x.data(), static_cast<int64_t>(x.size()), t.data());
  gelu_exact(x.data(), static_cast<int64_t>(x.size()), e.data());
  gelu_quick(x.data(), static_cast<int64_t>(x.size()), qt.data());
  gelu_quick_exact(x.data(), static_cast<int64_t>(x.size()), qe.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double ref = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * v * (1 + 0.044715 * v * v)));
    const double qref = v / (1 + std::exp(-1.702 * v));
    EXPECT_NEAR(e[i], ref, 1e-5 * (1 + std::fabs(ref))) << v;
    EXPECT_NEAR(qe[i], qref, 1e-5 * (1 + std::fabs(qref))) << v;
    // Input and output each rounded to f16: relative error ~2^-10 of |x| (slope <= 1.13).
    EXPECT_NEAR(t[i], ref, 2.5e-3 * std::fabs(v) + 1e-6) << v;
    EXPECT_NEAR(qt[i], qref, 2.5e-3 * std::fabs(v) + 1e-6) << v;
  }
  EXPECT_EQ(t[x.size() - 3], 0.0f);   // x <= -10 -> 0
  EXPECT_EQ(t[x.size() - 2], 12.5f);  // x >= 10 -> x
  EXPECT_EQ(t[x.size() - 1], 0.0f);
}

TEST(RopeMulti, EqualPositionsAreNeoxRopeBitExactly) {
  const int n_heads = 3, head_dim = 64;
  RopeParams p;
  p.style = RopeStyle::kNeox;
  p.n_rot = 64;
  p.freq_base = 1e6f;
  const int sections[4] = {8, 12, 12, 0};
  for (int64_t pos : {0, 1, 17, 300, 4095}) {
    std::vector<float> a = random_vec(n_heads * head_dim, 5), b = a;
    rope(a.data(), n_heads, head_dim, pos, p);
    const int64_t p4[4] = {pos, pos, pos, 0};
    rope_multi(b.data(), n_heads, head_dim, p4, sections, p);
    EXPECT_EQ(a, b) << pos;
  }
}

TEST(RopeMulti, EachSectionTurnsWithItsOwnPosition) {
  const int n_heads = 2, head_dim = 64;
  RopeParams p;
  p.n_rot = 64;
  p.freq_base = 1e6f;
  const int sections[4] = {8, 12, 12, 0};
  const int64_t pos[4] = {17, 19, 20, 0};
  std::vector<float> x = random_vec(n_heads * head_dim, 6), y = x;
  rope_multi(y.data(), n_heads, head_dim, pos, sections, p);
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < 32; ++i) {
      const int64_t ps = i < 8 ? pos[0] : i < 20 ? pos[1] : pos[2];
      const double theta = ps * std::pow(1e6, -2.0 * i / 64);
      const double x0 = x[h * 64 + i], x1 = x[h * 64 + i + 32];
      EXPECT_NEAR(y[h * 64 + i], x0 * std::cos(theta) - x1 * std::sin(theta), 2e-4) << h << " " << i;
      EXPECT_NEAR(y[h * 64 + i + 32], x0 * std::sin(theta) + x1 * std::cos(theta), 2e-4) << h << " " << i;
    }
  }
}

// Qwen3-VL's interleaved layout (ggml IMROPE) with sections {12, 10, 10, 0}: pairs cycle
// t, h, w while each section lasts (pairs 0..29), pair 30 is t (30 % 3 == 0, < 36) and pair
// 31 takes the fourth position. With all four equal it is NeoX RoPE bit for bit.
TEST(RopeMulti, InterleavedSectionsCycleTHW) {
  const int n_heads = 2, head_dim = 64;
  RopeParams p;
  p.n_rot = 64;
  p.freq_base = 5e6f;
  const int sections[4] = {12, 10, 10, 0};
  const int64_t pos[4] = {17, 19, 21, 0};
  std::vector<float> x = random_vec(n_heads * head_dim, 8), y = x;
  rope_multi(y.data(), n_heads, head_dim, pos, sections, p, /*interleaved=*/true);
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < 32; ++i) {
      const int64_t ps = i == 31 ? pos[3] : i % 3 == 1 ? pos[1] : i % 3 == 2 ? pos[2] : pos[0];
      const double theta = ps * std::pow(5e6, -2.0 * i / 64);
      const double x0 = x[h * 64 + i], x1 = x[h * 64 + i + 32];
      EXPECT_NEAR(y[h * 64 + i], x0 * std::cos(theta) - x1 * std::sin(theta), 2e-4) << h << " " << i;
      EXPECT_NEAR(y[h * 64 + i + 32], x0 * std::sin(theta) + x1 * std::cos(theta), 2e-4) << h << " " << i;
    }
  }
  p.style = RopeStyle::kNeox;
  for (int64_t q : {0, 5, 300}) {
    std::vector<float> a = random_vec(n_heads * head_dim, 9), b = a;
    rope(a.data(), n_heads, head_dim, q, p);
    const int64_t p4[4] = {q, q, q, q};
    rope_multi(b.data(), n_heads, head_dim, p4, sections, p, /*interleaved=*/true);
    EXPECT_EQ(a, b) << q;
  }
}

TEST(RopeVision, HalvesTurnWithYAndXFromTheirOwnLadders) {
  const int n_heads = 2, head_dim = 16;
  const int sections[4] = {4, 4, 4, 4};
  const int64_t y = 3, x = 5;
  const int64_t pos[4] = {y, x, y, x};
  std::vector<float> v = random_vec(n_heads * head_dim, 7), r = v;
  rope_vision(r.data(), n_heads, head_dim, pos, sections, 10000.0f);
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < 8; ++i) {
      const int k = i < 4 ? i : i - 4;  // each section restarts the ladder
      const double theta = (i < 4 ? y : x) * std::pow(10000.0, -2.0 * k / 8);
      const double x0 = v[h * 16 + i], x1 = v[h * 16 + i + 8];
      EXPECT_NEAR(r[h * 16 + i], x0 * std::cos(theta) - x1 * std::sin(theta), 1e-5) << h << " " << i;
      EXPECT_NEAR(r[h * 16 + i + 8], x0 * std::sin(theta) + x1 * std::cos(theta), 1e-5) << h << " " << i;
    }
  }
}

}  // namespace
}  // namespace vlkv
