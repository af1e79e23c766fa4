// The 1-bit / ternary / mixed 2-1-bit codecs (sign1c, ternary, mixk) and the real FFT
// behind them: FFT vs a naive DFT, known-answer blocks, exact dequantized values,
// relative RMS on Gaussian and outlier-heavy data within the declared bounds, fused
// scores/accumulate vs the scalar path and vs decode() at every SIMD level, exact bits
// per element, and bad specs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <random>
#include <utility>

#include "base/fp16.h"
#include "kv/codec_registry.h"
#include "kv/methods/vidkv/real_fft.h"
#include "kv/methods/vidkv/sign1_codecs.h"
#include "kv/methods/vidkv/sign1_kernels.h"
#include "kv/methods/vidkv/sign1_transform.h"
#include "kv/methods/vidkv/ternary_tiles.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

std::shared_ptr<const Codec> codec(const std::string& spec) {
  auto c = make_codec(spec);
  EXPECT_TRUE(c.is_ok()) << spec << ": " << c.status().message();
  return c.is_ok() ? *c : nullptr;
}

float f16r(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

// Keys-like: Gaussian rows, every 8th channel scaled 15x, per-channel offsets.  [n, d]
std::vector<float> outlier_heavy(int n, int d, uint32_t seed) {
  std::vector<float> x = gaussian(static_cast<size_t>(n) * d, seed);
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> off(-2.0f, 2.0f);
  std::vector<float> bias(d);
  for (auto& b : bias) b = off(rng);
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) x[static_cast<size_t>(t) * d + c] = x[static_cast<size_t>(t) * d + c] * (c % 8 == 3 ? 15.0f : 1.0f) + bias[c];
  return x;
}

// ---------------- FFT ----------------
TEST(RealFft, MatchesNaiveDftAndIsOrthonormal) {
  for (int n : {1, 2, 3, 5, 8, 12, 16, 31, 48, 64, 96, 128, 256}) {
    const std::vector<float> x = kvtest::random_vec(n, n, -2.0f, 2.0f);
    std::vector<double> re(n), im(n);
    for (int k = 0; k < n; ++k)
      for (int j = 0; j < n; ++j) {
        const double a = -2.0 * std::numbers::pi * static_cast<double>(j) * k / n;
        re[k] += x[j] * std::cos(a);
        im[k] += x[j] * std::sin(a);
      }
    RealFft f(n);
    std::vector<float> c(n), y(n), fr(n), fi(n);
    f.forward(x.data(), c.data());
    const double tol = 1e-5 * std::sqrt(static_cast<double>(n)) * 2.0;
    EXPECT_NEAR(c[0], re[0] / std::sqrt(n), tol) << n;
    for (int k = 1; 2 * k < n; ++k) {
      EXPECT_NEAR(c[2 * k - 1], re[k] * std::sqrt(2.0 / n), tol) << n << " k=" << k;
      EXPECT_NEAR(c[2 * k], im[k] * std::sqrt(2.0 / n), tol) << n << " k=" << k;
    }
    if (n % 2 == 0 && n > 1) {
      EXPECT_NEAR(c[n - 1], re[n / 2] / std::sqrt(n), tol) << n;
    }
    double ex = 0, ec = 0;
    for (int i = 0; i < n; ++i) ex += x[i] * x[i], ec += c[i] * c[i];
    EXPECT_NEAR(ec, ex, 1e-5 * ex) << "Parseval n=" << n;
    f.inverse(c.data(), y.data());
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << n;
    f.complex_forward(x.data(), fr.data(), fi.data());
    for (int k = 0; k < n; ++k) {
      EXPECT_NEAR(fr[k], re[k], tol * std::sqrt(n)) << n;
      EXPECT_NEAR(fi[k], im[k], tol * std::sqrt(n)) << n;
    }
    f.complex_inverse_real(fr.data(), fi.data(), y.data());
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << n;
  }
}

// n <= kDenseMaxN: forward / inverse multiply by the float matrix (scalar or AVX-512); they
// must match the double FFT to float rounding: 2e-6 * |x| * sqrt(n) bounds a sum of n
// float products of terms <= |x| (measured <= 1.5e-6 absolute at n = 128, |x_i| <= 2).
TEST(RealFft, DenseMatrixPathMatchesTheFftAtEveryTier) {
  kvtest::SimdLevelGuard guard;
  for (int n : {1, 2, 3, 5, 16, 31, 64, 100, 128}) {
    RealFft f(n);
    const std::vector<float> x = kvtest::random_vec(n, 3 * n, -2.0f, 2.0f);
    double norm = 0;
    for (float v : x) norm += static_cast<double>(v) * v;
    const double tol = 2e-6 * std::sqrt(norm) * std::sqrt(static_cast<double>(n));
    std::vector<float> ref(n), back(n);
    f.forward_reference(x.data(), ref.data());
    f.inverse_reference(ref.data(), back.data());
    for (SimdTier tier : kvtest::simd_tiers()) {
      set_simd_tier_for_testing(tier);  // the dense product's kernel is the tier's
      const char* simd = simd_tier_name(tier);
      std::vector<float> c(n), y(n), inplace = x;
      f.forward_dense(x.data(), c.data(), true);
      f.inverse_dense(ref.data(), y.data(), true);
      f.forward_dense(inplace.data(), inplace.data(), true);  // x and c may alias
      for (int i = 0; i < n; ++i) {
        ASSERT_NEAR(c[i], ref[i], tol) << n << " simd " << simd << " i=" << i;
        ASSERT_NEAR(y[i], back[i], tol) << n << " simd " << simd << " i=" << i;
        ASSERT_EQ(inplace[i], c[i]) << n << " simd " << simd;
      }
    }
  }
}

// The batch of 8 (an f32 FFT in SIMD lanes at AVX2 and up, forward() per vector at
// scalar) against the double FFT of each vector; f32 radix-2 error grows ~log2(n) eps |x| per output.
TEST(RealFft, BatchOfEightMatchesTheFftAtEveryTier) {
  kvtest::SimdLevelGuard guard;
  for (int n : {1, 3, 4, 8, 16, 64, 100, 128, 256}) {
    RealFft f(n);
    const int xs = n + 3, cs = n + 5;  // row strides
    const std::vector<float> x = kvtest::random_vec(8 * static_cast<size_t>(xs), 7 * n, -2.0f, 2.0f);  // [8][xs]
    for (SimdTier tier : kvtest::simd_tiers()) {
      set_simd_tier_for_testing(tier);
      std::vector<float> c(8 * static_cast<size_t>(cs), -9.0f);
      f.forward_batch8(x.data(), xs, c.data(), cs);
      for (int l = 0; l < 8; ++l) {
        for (int i = n; i < cs; ++i) ASSERT_EQ(c[l * cs + i], -9.0f) << "row " << l << " written past n";
        std::vector<float> in(n), ref(n);
        double norm = 0;
        for (int i = 0; i < n; ++i) {
          in[i] = x[l * xs + i];
          norm += static_cast<double>(in[i]) * in[i];
        }
        f.forward_reference(in.data(), ref.data());
        for (int i = 0; i < n; ++i)
          ASSERT_NEAR(c[l * cs + i], ref[i], 2e-6 * std::sqrt(norm) * std::sqrt(static_cast<double>(n)))
              << simd_tier_name(tier) << " n=" << n << " lane " << l << " i=" << i;
      }
    }
  }
}

TEST(RealFft, AdjointOfEveryTransform) {
  using sign1::FftMode;
  for (FftMode m : {FftMode::kNone, FftMode::kReal, FftMode::kComplex})
    for (int n : {7, 32, 64}) {
      const auto& T = sign1::coef_transform(m, n);
      const std::vector<float> q = kvtest::random_vec(n, 1 + n), c = kvtest::random_vec(T.n_coef(), 2 + n);
      std::vector<float> x(n), qc(T.n_coef());
      T.synthesize(c.data(), x.data());
      T.adjoint(q.data(), qc.data());
      double a = 0, b = 0;
      for (int i = 0; i < n; ++i) a += static_cast<double>(q[i]) * x[i];
      for (int k = 0; k < T.n_coef(); ++k) b += static_cast<double>(qc[k]) * c[k];
      EXPECT_NEAR(a, b, 1e-5 * (std::abs(a) + 1)) << sign1::fft_mode_name(m) << " n=" << n;
    }
}

// ---------------- known answers ----------------
TEST(Sign1c, KnownAnswerBlock) {
  auto c = codec("sign1c:G=8");
  const int d = 2;
  // channel 0: mean|x| = 1.5; channel 1: all zero except one -4 -> mean 0.5
  const float x[8][2] = {{1, 0}, {-2, 0}, {1, 0}, {-2, 0}, {1, -4}, {2, 0}, {-1, 0}, {2, 0}};
  ASSERT_EQ(c->block_bytes(d), 2 * 2 + 2 * 1);
  std::vector<uint8_t> blk(c->block_bytes(d));
  c->encode(&x[0][0], d, d, blk.data());
  uint16_t h0, h1;
  std::memcpy(&h0, &blk[0], 2);
  std::memcpy(&h1, &blk[2], 2);
  EXPECT_EQ(fp16_to_fp32(h0), 1.5f);
  EXPECT_EQ(fp16_to_fp32(h1), 0.5f);
  EXPECT_EQ(blk[4], 0b01001010);  // channel 0 negative at tokens 1, 3, 6
  EXPECT_EQ(blk[5], 0b00010000);  // channel 1 negative at token 4 (0 codes as +)
  std::vector<float> y(16);
  c->decode(blk.data(), d, y.data());
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(y[2 * t], x[t][0] < 0 ? -1.5f : 1.5f);  // +-scale, never {0, s}
    EXPECT_EQ(y[2 * t + 1], x[t][1] < 0 ? -0.5f : 0.5f);
  }
}

TEST(Ternary, KnownAnswerBlock) {
  auto c = codec("ternary:G=5");
  const int d = 1;  // mean|x| = 1.0, threshold 0.5
  const float x[5] = {0.2f, -0.6f, 1.7f, -0.4f, 2.1f};
  ASSERT_EQ(c->block_bytes(d), 2 + 1);
  std::vector<uint8_t> blk(c->block_bytes(d));
  c->encode(x, d, d, blk.data());
  uint16_t h;
  std::memcpy(&h, &blk[0], 2);
  EXPECT_EQ(fp16_to_fp32(h), f16r(1.0f));
  // codes 0,-1,+1,0,+1 -> digits 1,0,2,1,2 -> 1 + 0*3 + 2*9 + 1*27 + 2*81 = 208
  EXPECT_EQ(blk[2], 208);
  std::vector<float> y(5);
  c->decode(blk.data(), d, y.data());
  const float want[5] = {0, -1, 1, 0, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], want[i]);
}

// Same values as above. fit=scale keeps the codes 0,-1,+1,0,+1 and stores the mean |x|
// of the nonzero ones, (0.6 + 1.7 + 2.1) / 3. fit=opt: over |x| sorted 2.1, 1.7, 0.6, 0.4,
// 0.2 the score (sum of the m largest)^2 / m is 4.41, 7.22, 6.45, 5.76, 5.0: m = 2, codes
// 0,0,+1,0,+1, scale 1.9.
TEST(Ternary, KnownAnswerBlockLeastSquaresFits) {
  const float x[5] = {0.2f, -0.6f, 1.7f, -0.4f, 2.1f};
  struct Case {
    const char* spec;
    float scale;
    float codes[5];
  } cases[] = {{"ternary:G=5,fit=scale", (0.6f + 1.7f + 2.1f) / 3, {0, -1, 1, 0, 1}},
               {"ternary:G=5,fit=opt", (1.7f + 2.1f) / 2, {0, 0, 1, 0, 1}}};
  for (const Case& k : cases) {
    auto c = codec(k.spec);
    std::vector<uint8_t> blk(c->block_bytes(1));
    c->encode(x, 1, 1, blk.data());
    std::vector<float> y(5);
    c->decode(blk.data(), 1, y.data());
    for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], k.codes[i] * f16r(k.scale)) << k.spec << " " << i;
  }
}

// Per channel and group: fit=scale's squared error <= fit=mean's (least squares for the
// same codes) and fit=opt's <= both (least squares over every threshold); slack 1e-3
// relative for the f16 rounding of the stored scale. And the least-squares scales do not
// shrink: the nonzero codes' reconstructed |x| sum to their values' sum |x| (within that
// rounding), where mean's fall ~25% short on Gaussian data.
TEST(Ternary, LeastSquaresFitsBeatTheMeanScaleAndDoNotShrink) {
  const int d = 48, G = 32;
  auto mean = codec("ternary:G=32"), scale = codec("ternary:G=32,fit=scale"), opt = codec("ternary:G=32,fit=opt");
  for (uint32_t seed : {5u, 6u}) {
    const std::vector<float> x = seed == 5 ? gaussian(static_cast<size_t>(G) * d, seed) : outlier_heavy(G, d, seed);
    std::vector<float> ym(x.size()), ys(x.size()), yo(x.size());
    std::vector<uint8_t> blk(mean->block_bytes(d));
    for (auto [c, y] : {std::pair{mean.get(), &ym}, std::pair{scale.get(), &ys}, std::pair{opt.get(), &yo}}) {
      c->encode(x.data(), d, d, blk.data());
      c->decode(blk.data(), d, y->data());
    }
    double shrink_mean = 0, total = 0;
    for (int ch = 0; ch < d; ++ch) {
      double em = 0, es = 0, eo = 0, ss = 0, rec_s = 0, abs_s = 0, rec_m = 0, abs_m = 0;
      for (int t = 0; t < G; ++t) {
        const size_t i = static_cast<size_t>(t) * d + ch;
        em += (ym[i] - x[i]) * static_cast<double>(ym[i] - x[i]);
        es += (ys[i] - x[i]) * static_cast<double>(ys[i] - x[i]);
        eo += (yo[i] - x[i]) * static_cast<double>(yo[i] - x[i]);
        ss += static_cast<double>(x[i]) * x[i];
        if (ys[i] != 0) rec_s += std::abs(ys[i]), abs_s += std::abs(x[i]);
        if (ym[i] != 0) rec_m += std::abs(ym[i]), abs_m += std::abs(x[i]);
      }
      EXPECT_LE(es, em + 1e-3 * ss) << seed << " " << ch;
      EXPECT_LE(eo, es + 1e-3 * ss) << seed << " " << ch;
      EXPECT_NEAR(rec_s, abs_s, 1e-3 * abs_s) << seed << " " << ch;
      shrink_mean += abs_m - rec_m;
      total += abs_m;
    }
    if (seed == 5) {
      EXPECT_GT(shrink_mean / total, 0.15);  // Gaussian: 1 - 0.80 / 1.07 = 0.25
    }
  }
}

TEST(Mixk, KnownAnswerBlock) {
  auto c = codec("mixk:G=8,frac=0.5");
  const int d = 4;
  // ranges: ch0 3 (0..3), ch1 0.2, ch2 6 (-3..3), ch3 0.4  -> outliers {0, 2}
  float x[8][4];
  for (int t = 0; t < 8; ++t) {
    x[t][0] = static_cast<float>(t % 4);          // codes 0,1,2,3 exact at s = 1, m = 0
    x[t][1] = t % 2 ? 0.1f : -0.1f;
    x[t][2] = t < 4 ? -3.0f : 3.0f;               // codes 0 / 3, s = 2, m = -3
    x[t][3] = t == 5 ? -0.4f : 0.0f;
  }
  // mask 1 + 4*2 + 2*2 + (2*2 + 2) * 1 = 1 + 8 + 4 + 6
  ASSERT_EQ(c->block_bytes(d), 19);
  std::vector<uint8_t> blk(19);
  c->encode(&x[0][0], d, d, blk.data());
  EXPECT_EQ(blk[0], 0b0101);
  std::vector<float> y(32);
  c->decode(blk.data(), d, y.data());
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(y[4 * t + 0], x[t][0]);
    EXPECT_EQ(y[4 * t + 2], x[t][2]);
    EXPECT_EQ(y[4 * t + 1], x[t][1] < 0 ? -f16r(0.1f) : f16r(0.1f));
    EXPECT_EQ(y[4 * t + 3], t == 5 ? -f16r(0.05f) : f16r(0.05f));
  }
  EXPECT_EQ(blk[13], 0b10101010);  // ch0 low bits: codes 1, 3 at t = 1, 3, 5, 7
  EXPECT_EQ(blk[14], 0b11110000);  // ch2 low bits: code 3 at t >= 4
  EXPECT_EQ(blk[15], 0b11001100);  // ch0 high bits: codes 2, 3
  EXPECT_EQ(blk[16], 0b11110000);  // ch2 high bits
}

// ---------------- exact dequantized values ----------------
TEST(Sign1c, DequantizesToPlusMinusScaleExactly) {
  auto c = codec("sign1c:G=32");
  const int d = 64, G = 32;
  const std::vector<float> x = outlier_heavy(G, d, 3);
  std::vector<uint8_t> blk(c->block_bytes(d));
  std::vector<float> y(x.size());
  c->encode(x.data(), d, d, blk.data());
  c->decode(blk.data(), d, y.data());
  for (int ch = 0; ch < d; ++ch) {
    double s = 0;
    for (int t = 0; t < G; ++t) s += std::abs(x[t * d + ch]);
    const float sc = f16r(static_cast<float>(s / G));
    for (int t = 0; t < G; ++t) ASSERT_EQ(y[t * d + ch], x[t * d + ch] < 0 ? -sc : sc) << ch << " " << t;
  }
}

TEST(Ternary, DequantizesToCodeTimesScaleExactly) {
  auto c = codec("ternary:G=32,thr=0.5");
  const int d = 72, G = 32;
  const std::vector<float> x = outlier_heavy(G, d, 4);
  std::vector<uint8_t> blk(c->block_bytes(d));
  std::vector<float> y(x.size());
  c->encode(x.data(), d, d, blk.data());
  c->decode(blk.data(), d, y.data());
  for (int ch = 0; ch < d; ++ch) {
    double s = 0;
    for (int t = 0; t < G; ++t) s += std::abs(x[t * d + ch]);
    const float sc = f16r(static_cast<float>(s / G)), th = 0.5f * sc;
    for (int t = 0; t < G; ++t) {
      const float v = x[t * d + ch];
      ASSERT_EQ(y[t * d + ch], v > th ? sc : v < -th ? -sc : 0.0f) << ch << " " << t;
    }
  }
}

// ---------------- relative RMS ----------------
double rel_rms(const Codec& c, const std::vector<float>& x, int n, int d) {
  const int G = c.tokens_per_block();
  std::vector<uint8_t> blk(c.block_bytes(d));
  std::vector<float> y(static_cast<size_t>(G) * d);
  double e = 0, s = 0;
  for (int b = 0; b < n / G; ++b) {
    const float* xb = &x[static_cast<size_t>(b) * G * d];
    c.encode(xb, d, d, blk.data());
    c.decode(blk.data(), d, y.data());
    for (size_t i = 0; i < y.size(); ++i) e += (y[i] - xb[i]) * static_cast<double>(y[i] - xb[i]), s += static_cast<double>(xb[i]) * xb[i];
  }
  return std::sqrt(e / s);
}

const char* const kSpecs[] = {
    "sign1c:G=32",     "sign1c:G=32,fft=real",       "sign1c:G=32,fft=complex",       "ternary:G=32",
    "ternary:G=32,fit=scale", "ternary:G=32,fit=opt", "mixk:G=32,frac=0.5", "mixk:G=32,frac=0.5,fft=real", "mixk:G=32,frac=0.5,fft=complex", "mixk:G=32,frac=0.25,fft=real",
};

TEST(Sign1Codecs, RelativeRmsWithinDeclaredBounds) {
  for (int d : {64, 128}) {
    const int n = 64 * 32;
    const std::vector<float> g = gaussian(static_cast<size_t>(n) * d, d), o = outlier_heavy(n, d, d + 1);
    for (const char* spec : kSpecs) {
      auto c = codec(spec);
      const double rg = rel_rms(*c, g, n, d), ro = rel_rms(*c, o, n, d);
      std::printf("  %-34s d=%3d  %.4f bits/elem  rel RMS gaussian %.4f  outlier-heavy %.4f\n", spec, d,
                  c->bits_per_element(d), rg, ro);
      EXPECT_GT(c->rms_error_bound(), 0.0) << spec;
      EXPECT_LE(rg, c->rms_error_bound()) << spec << " d=" << d;
      EXPECT_LE(ro, c->rms_error_bound()) << spec << " d=" << d;
    }
  }
}

TEST(Sign1Codecs, RoundTripWithinMaxAbsBound) {
  for (const char* spec : kSpecs) {
    auto c = codec(spec);
    for (int d : {8, 36, 64, 128}) {
      const int G = c->tokens_per_block();
      const std::vector<float> x = outlier_heavy(G, d, 11 + d);
      std::vector<uint8_t> blk(c->block_bytes(d));
      std::vector<float> y(x.size());
      c->encode(x.data(), d, d, blk.data());
      c->decode(blk.data(), d, y.data());
      double mx = 0;
      for (float e : x) mx = std::max(mx, static_cast<double>(std::abs(e)));
      for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::abs(y[i] - x[i]), c->error_bound() * mx) << spec << " " << i;
    }
  }
}

// ---------------- bits per element ----------------
TEST(Sign1Codecs, ExactBitsPerElement) {
  struct Want { const char* spec; int d; double bits; };
  const Want wants[] = {
      {"sign1c:G=32", 128, 1.5},           {"sign1c:G=32,fft=real", 128, 1.5},
      {"sign1c:G=32,fft=complex", 128, 3.0}, {"sign1c:G=32", 64, 1.5},
      {"sign1c:G=64", 128, 1.25},
      {"ternary:G=32", 128, (256 + 820) * 8.0 / 4096},  // 2.1015625
      {"ternary:G=32", 64, (128 + 410) * 8.0 / 2048},
      {"mixk:G=32,frac=0.5,fft=real", 128, (16 + 256 + 128 + 192 * 4) * 8.0 / 4096},  // 2.28125
      {"mixk:G=32,frac=0.5,fft=none", 64, (8 + 128 + 64 + 96 * 4) * 8.0 / 2048},
      {"mixk:G=32,frac=0.5,fft=complex", 128, (16 + 256 + 256 + 256 * 4) * 8.0 / 4096},  // 3.03125
  };
  for (const Want& w : wants) EXPECT_DOUBLE_EQ(codec(w.spec)->bits_per_element(w.d), w.bits) << w.spec << " d=" << w.d;
  // VidKV 1.5/1.58 setting: keys mixk + values ternary <= 2.2 stored bits per element on average.
  const double k = codec("mixk:G=32,frac=0.5,fft=real")->bits_per_element(128);
  const double v = codec("ternary:G=32")->bits_per_element(128);
  EXPECT_LE((k + v) / 2, 2.2);
}

// ---------------- bad specs ----------------
TEST(Sign1Codecs, BadSpecsAreClearErrors) {
  for (const char* spec : {"sign1c:G=12", "sign1c:G=0", "sign1c:G=512", "sign1c:fft=fast", "mixk:G=20",
                           "mixk:frac=1.5", "mixk:fft=yes", "ternary:G=0", "ternary:thr=-1", "ternary:g=32",
                           "ternary:fit=lsq"}) {
    auto c = make_codec(spec);
    ASSERT_FALSE(c.is_ok()) << spec;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_FALSE(c.status().message().empty());
  }
  EXPECT_NE(make_codec("sign1c:G=12").status().message().find("multiple of 8"), std::string::npos);
  EXPECT_NE(make_codec("mixk:fft=yes").status().message().find("none, real, complex"), std::string::npos);
  const Status s = codec("sign1c:G=32,fft=real")->check_head_dim(1000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(codec("sign1c:G=32,fft=real")->check_head_dim(8).is_ok());
  // Both FFT codecs take RealFft's range, each under its own name.
  for (const char* spec : {"sign1c:G=32,fft=real", "mixk:G=32,frac=0.5,fft=real"}) {
    const Status too_wide = codec(spec)->check_head_dim(RealFft::kMaxN + 1);
    EXPECT_EQ(too_wide.code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_EQ(too_wide.message(), std::string(spec) + ": head_dim 513 is outside [1, 512]") << too_wide.message();
    EXPECT_TRUE(codec(spec)->check_head_dim(RealFft::kMaxN).is_ok()) << spec;
  }
  EXPECT_EQ(codec("mixk:G=32,frac=0.5,fft=real")->name(), "mixk:G=32,frac=0.5,fft=real");
  EXPECT_EQ(codec("ternary")->name(), "ternary:G=32,thr=0.5,fit=mean");
  EXPECT_EQ(codec("ternary:fit=opt")->name(), "ternary:G=32,thr=0.5,fit=opt");
  EXPECT_NE(make_codec("ternary:fit=lsq").status().message().find("mean, scale, opt"), std::string::npos);
}

// The tiled trit order (head_dim % 16 == 0, G % 4 == 0) permutes the row-major stream: same
// bytes, every element once.
TEST(Ternary, TritOrderIsAPermutation) {
  for (auto [d, G] : {std::pair{128, 32}, {64, 32}, {16, 4}, {48, 20}, {128, 256}, {36, 32}, {64, 7}}) {
    const ternt::TritOrder o = ternt::trit_order(d, G);
    EXPECT_EQ(o.tiled, d % 16 == 0 && G % 4 == 0);
    std::vector<int> seen(static_cast<size_t>(d) * G, 0);
    for (int t = 0; t < G; ++t)
      for (int c = 0; c < d; ++c) {
        const int64_t i = ternt::trit_index(o, t, c);
        ASSERT_GE(i, 0);
        ASSERT_LT(i, static_cast<int64_t>(d) * G);
        ++seen[i];
      }
    for (int v : seen) ASSERT_EQ(v, 1) << d << " " << G;
  }
}

// Every tile kernel this CPU has against the digits of the stored bytes read directly
// (not through any kernel): decode gives code(t, c) at its tile position exactly; accum
// matches sum_t p[t] code(t, c) sig[c] within the 15-bit rounding of p; scores match f32
// dots within f32 rounding.
TEST(Ternary, TileKernelsMatchTheStoredDigits) {
  int n_tested = 0;
  std::mt19937 rng(11);
  for (auto [d, G] : {std::pair{128, 32}, {64, 32}, {16, 4}, {64, 20}, {128, 256}, {48, 8}}) {
    const ternt::TritOrder o = ternt::trit_order(d, G);
    ASSERT_TRUE(o.tiled);
    const int64_t n = static_cast<int64_t>(G) * d, nbytes = (n + 4) / 5;
    std::vector<uint8_t> trits(nbytes + 64);  // + slack: kernels read whole vectors
    for (int64_t i = 0; i < nbytes; ++i) trits[i] = static_cast<uint8_t>(rng() % 243);
    auto code_ref = [&](int t, int c) {
      const int64_t i = ternt::trit_index(o, t, c);
      int v = trits[i / 5];
      for (int k = 0; k < i % 5; ++k) v /= 3;
      return v % 3 - 1;
    };
    std::vector<float> sig(d), p(G), qs(d);
    std::uniform_real_distribution<float> u01(0.0f, 1.0f), sym(-1.0f, 1.0f);
    for (auto& e : sig) e = 0.1f + u01(rng);
    for (int t = 0; t < G; ++t) p[t] = t % 7 == 3 ? 50.0f * u01(rng) : u01(rng);  // outliers
    for (auto& e : qs) e = sym(rng) * (rng() % 8 == 0 ? 20.0f : 1.0f);
    double pmax = 0;
    for (float e : p) pmax = std::max(pmax, static_cast<double>(e));
    std::vector<double> ref_o(d, 0.25), ref_s(G, 0.0), mag_s(G, 0.0);
    for (int c = 0; c < d; ++c)
      for (int t = 0; t < G; ++t) {
        ref_o[c] += static_cast<double>(p[t]) * code_ref(t, c) * sig[c];
        ref_s[t] += static_cast<double>(qs[c]) * code_ref(t, c) * 0.5;
        mag_s[t] += std::abs(qs[c]) * 0.5;
      }
    for (SimdTier tier : kvtest::simd_tiers()) {
      const sign1::Sign1Kernels& k = sign1::sign1_kernels_at(tier);
      if (!k.ternary_decode) continue;  // scalar: the codec reads digits (tested through decode())
      ++n_tested;
      const char* name = simd_tier_name(tier);
      std::vector<int8_t> codes(static_cast<size_t>(64) * o.n_qg + 8, 99);
      k.ternary_decode(trits.data(), o, codes.data());
      for (int t = 0; t < G; ++t)
        for (int c = 0; c < d; ++c)
          ASSERT_EQ(codes[64 * ((c / 16) * (G / 4) + t / 4) + 4 * (c % 16) + t % 4], code_ref(t, c))
              << name << " d=" << d << " G=" << G << " t=" << t << " c=" << c;
      std::vector<float> lr(G, -7.0f);
      k.ternary_scores(qs.data(), codes.data(), o, 0.5f, lr.data());
      for (int t = 0; t < G; ++t) ASSERT_NEAR(lr[t], ref_s[t], 1e-5 * mag_s[t]) << "scores d=" << d << " t=" << t;
      {
        std::vector<float> out(d, 0.25f);
        ASSERT_TRUE(k.ternary_accum(p.data(), codes.data(), o, sig.data(), out.data()));
        for (int c = 0; c < d; ++c)  // 15-bit p: |error| <= sig G step / 2 (+ f32 rounding)
          ASSERT_NEAR(out[c], ref_o[c], sig[c] * G * pmax / 32767.0 / 2 + 1e-5 * (1 + std::abs(ref_o[c])))
              << name << " d=" << d << " G=" << G << " c=" << c;
        std::vector<float> bad = p;
        bad[G / 2] = -1.0f;
        EXPECT_FALSE(k.ternary_accum(bad.data(), codes.data(), o, sig.data(), out.data())) << name << ": negative p";
        bad[G / 2] = std::nanf("");
        EXPECT_FALSE(k.ternary_accum(bad.data(), codes.data(), o, sig.data(), out.data())) << name << ": NaN p";
      }
    }
  }
  if (cpu_features().avx2 || cpu_features().neon) {
    EXPECT_GE(n_tested, 6) << "the AVX2 / NEON variants ran";
  }
}

// ---------------- fused ops ----------------

class FusedOps : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedOps, MatchScalarAndDecodeAtEverySimdLevel) {
  auto cp = codec(GetParam());
  ASSERT_TRUE(cp);
  const Codec& c = *cp;
  kvtest::SimdLevelGuard guard;
  for (int d : {8, 36, 64, 72, 128}) {
    for (bool outliers : {false, true}) {
      for (int n_q : {1, 3, 4, 6, 7}) {  // GQA ratios 1, 3, 4, 6 (and an odd 7)
        const int tpb = c.tokens_per_block();
        const int n = tpb * 5;
        // Outlier-heavy data keeps mixk's channel map stable across blocks (the cached path).
        const std::vector<float> x = outliers ? outlier_heavy(n, d, n + d) : gaussian(static_cast<size_t>(n) * d, n + d);
        const std::vector<float> q = kvtest::random_vec(static_cast<size_t>(n_q) * d, 3 + d, -2.0f, 2.0f);
        // n_q 3: some negative p (attention never passes them; the integer kernels refuse them).
        const std::vector<float> p = kvtest::random_vec(static_cast<size_t>(n_q) * n, 5 + d, n_q == 3 ? -0.25f : 0.0f, 1.0f);
        kvtest::PagedCodes paged = kvtest::encode_paged(c, x, n, d, /*blocks_per_page=*/2, /*skip_blocks=*/1, /*slack_bytes=*/0);
        std::vector<float> dec(static_cast<size_t>(n) * d);
        for (int b = 0; b < n / tpb; ++b) c.decode(paged.view.block(b), d, &dec[static_cast<size_t>(b) * tpb * d]);
        const float scale = 0.125f;
        // Reference from decode() in double; magnitudes bound the f32 rounding (+ the FFT's).
        std::vector<double> ref_s(static_cast<size_t>(n_q) * n), mag_s(ref_s.size());
        std::vector<double> ref_o(static_cast<size_t>(n_q) * d, 0.5), mag_o(ref_o.size(), 0.5);
        for (int r = 0; r < n_q; ++r)
          for (int t = 0; t < n; ++t) {
            double s = 0, qq = 0, kk = 0;
            for (int i = 0; i < d; ++i) {
              const double a = q[r * d + i], b = dec[static_cast<size_t>(t) * d + i];
              s += a * b;
              qq += a * a;
              kk += b * b;
            }
            ref_s[r * n + t] = s * scale;
            mag_s[r * n + t] = std::sqrt(qq * kk) * d * scale;
            for (int i = 0; i < d; ++i) {
              ref_o[r * d + i] += p[r * n + t] * static_cast<double>(dec[static_cast<size_t>(t) * d + i]);
              mag_o[r * d + i] += std::abs(p[r * n + t]) * std::sqrt(kk);
            }
          }
        // ternary on tiles (AVX2 and up) rounds each block's p to 15 bits, step = max p / 32767:
        // |error| <= sum over blocks of G * step / 2 * scale_c, scale_c = max |decoded| there.
        std::vector<double> p15_o(ref_o.size(), 0.0);
        if (GetParam().rfind("ternary", 0) == 0)
          for (int r = 0; r < n_q; ++r)
            for (int b = 0; b < n / tpb; ++b) {
              double pm = 0;
              for (int t = b * tpb; t < (b + 1) * tpb; ++t) pm = std::max(pm, static_cast<double>(p[r * n + t]));
              for (int i = 0; i < d; ++i) {
                double xm = 0;
                for (int t = b * tpb; t < (b + 1) * tpb; ++t)
                  xm = std::max(xm, std::abs(static_cast<double>(dec[static_cast<size_t>(t) * d + i])));
                p15_o[r * d + i] += tpb * pm / 65534.0 * xm;
              }
            }
        std::vector<float> s0, o0;
        for (SimdTier tier : kvtest::simd_tiers()) {
          set_simd_tier_for_testing(tier);
          const SimdLevel level = simd_level();
          const bool p15 = c.fused_rounding(d).prob_bits == 15;  // the tile kernels round p
          if (level == SimdLevel::kScalar) {
            EXPECT_FALSE(p15) << "the scalar reference rounds nothing";
          }
          std::vector<float> logits(static_cast<size_t>(n_q) * (n + 3), -1.0f);
          c.scores(q.data(), n_q, paged.view, scale, logits.data(), n + 3);
          std::vector<float> out(static_cast<size_t>(n_q) * d, 0.5f);
          c.accumulate(p.data(), n, n_q, paged.view, out.data());
          for (int r = 0; r < n_q; ++r) {
            for (int t = 0; t < n; ++t)
              ASSERT_NEAR(logits[r * (n + 3) + t], ref_s[r * n + t], 2e-6 * mag_s[r * n + t])
                  << simd_tier_name(tier) << " d=" << d << " n_q=" << n_q << " r=" << r << " t=" << t;
            for (int t = n; t < n + 3; ++t) ASSERT_EQ(logits[r * (n + 3) + t], -1.0f);
            for (int i = 0; i < d; ++i)
              ASSERT_NEAR(out[r * d + i], ref_o[r * d + i], 2e-6 * mag_o[r * d + i] + (p15 ? p15_o[r * d + i] : 0.0))
                  << simd_tier_name(tier) << " d=" << d << " n_q=" << n_q << " r=" << r << " i=" << i;
          }
          if (level == SimdLevel::kScalar) {
            s0 = logits;
            o0 = out;
          } else {  // against the scalar path directly: only summation order differs
            for (size_t i = 0; i < s0.size(); ++i)
              ASSERT_NEAR(logits[i], s0[i], 1e-6 * (std::abs(s0[i]) + mag_s[0])) << simd_tier_name(tier) << " " << i;
            for (size_t i = 0; i < o0.size(); ++i)
              ASSERT_NEAR(out[i], o0[i], 1e-6 * (std::abs(o0[i]) + mag_o[i]) + (p15 ? p15_o[i] : 0.0))
                  << simd_tier_name(tier) << " " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Specs, FusedOps,
                         ::testing::Values("sign1c:G=32", "sign1c:G=8", "sign1c:G=24,fft=real", "sign1c:G=64,fft=complex",
                                           "ternary:G=32", "ternary:G=7,thr=0.7", "ternary:G=32,fit=opt", "ternary:G=20",
                                           "ternary:G=9,thr=0.7,fit=scale", "mixk:G=32,frac=0.5",
                                           "mixk:G=32,frac=0.5,fft=real", "mixk:G=16,frac=0.25,fft=real",
                                           "mixk:G=40,frac=0.5,fft=complex", "mixk:G=32,frac=0,fft=real",
                                           "mixk:G=32,frac=1"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// G is checked once for the three codecs: whole bytes of bit planes for sign1c and mixk, any
// count up to 256 for ternary; the message names the codec and the rule.
TEST(Sign1Codecs, TokenGroupOutOfRangeIsRefusedByName) {
  const struct {
    const char* spec;
    const char* message;
  } bad[] = {{"sign1c:G=12", "sign1c: G=12 must be a multiple of 8 in [8, 256]"},
             {"mixk:G=264", "mixk: G=264 must be a multiple of 8 in [8, 256]"},
             {"ternary:G=257", "ternary: G=257 must be in [1, 256]"},
             {"ternary:G=0", "G=0"}};
  for (const auto& b : bad) {
    Result<std::shared_ptr<const Codec>> c = make_codec(b.spec);
    ASSERT_FALSE(c.is_ok()) << b.spec;
    EXPECT_NE(c.status().message().find(b.message), std::string::npos) << b.spec << ": " << c.status().message();
  }
  EXPECT_TRUE(make_codec("ternary:G=7").is_ok());
  EXPECT_TRUE(make_codec("mixk:G=256").is_ok());
}

}  // namespace
}  // namespace vlkv
