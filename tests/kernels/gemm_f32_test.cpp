// The exact f32 GEMM (gemm_f32) and the blocked attention (attention_f32) against double
// references, at every SIMD tier and thread count, on shapes that leave partial tiles,
// partial panels and several 256-column / 256-key blocks.
#include "kernels/gemm_f32.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/attention_f32.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

constexpr double kU = 1.0 / (1 << 24);  // f32 unit roundoff

class GemmF32Test : public ::testing::Test {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Each y element is one multiply-add chain over K terms: |error| <= gamma_K * sum |w x| with
// gamma_K = K u / (1 - K u) (Higham, sums of products, rounded or fused alike). F16 weights
// are compared with their exact f32 dequantization, so the bound is the same.
TEST_F(GemmF32Test, MatchesDoubleReferenceWithinTheSummationBound) {
  struct Shape { GgmlType type; int64_t n_rows, n_cols; };
  for (const Shape sh : {Shape{GgmlType::kF32, 45, 600}, Shape{GgmlType::kF16, 161, 520}, Shape{GgmlType::kF32, 7, 3},
                         Shape{GgmlType::kBF16, 33, 257}, Shape{GgmlType::kQ8_0, 40, 512}}) {
    const WeightFormat* fmt = find_weight_format(sh.type);
    ASSERT_NE(fmt, nullptr);
    const size_t rb = static_cast<size_t>(sh.n_cols / fmt->block_elems) * fmt->block_bytes;
    std::vector<uint8_t> bytes(rb * sh.n_rows);
    std::vector<float> deq(sh.n_rows * sh.n_cols);
    const std::vector<float> src = random_vec(deq.size(), 5);
    for (int64_t r = 0; r < sh.n_rows; ++r) {
      fmt->quantize_row_ref(&src[r * sh.n_cols], bytes.data() + r * rb, sh.n_cols);
      fmt->dequantize_row_ref(bytes.data() + r * rb, &deq[r * sh.n_cols], sh.n_cols);
    }
    const WeightMatrix w{sh.type, bytes.data(), sh.n_rows, sh.n_cols, rb};
    for (int64_t n_tokens : {2, 13, 100}) {
      const std::vector<float> x = random_vec(n_tokens * sh.n_cols, 7);
      const double gamma = sh.n_cols * kU / (1 - sh.n_cols * kU);
      for (SimdTier tier : supported_simd_tiers()) {
        set_simd_tier_for_testing(tier);
        for (int threads : {1, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(n_tokens * sh.n_rows, NAN);
          gemm_f32(w, x.data(), n_tokens, y.data(), pool);
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t r = 0; r < sh.n_rows; ++r) {
              double s = 0, mag = 0;
              for (int64_t c = 0; c < sh.n_cols; ++c) {
                const double p = static_cast<double>(deq[r * sh.n_cols + c]) * x[t * sh.n_cols + c];
                s += p;
                mag += std::fabs(p);
              }
              ASSERT_NEAR(y[t * sh.n_rows + r], s, gamma * mag + 1e-30)
                  << ggml_type_name(sh.type) << " tier=" << simd_tier_name(tier) << " threads=" << threads
                  << " n_tokens=" << n_tokens << " t=" << t << " r=" << r;
            }
        }
      }
    }
  }
}

// A row's result depends on nothing but its own activations: the same bits whether it is
// multiplied alone (with one neighbour: n_tokens >= 2), in a large call, or on other threads.
TEST_F(GemmF32Test, RowsAreBitEqualWhateverTheBatch) {
  const int64_t n_rows = 70, n_cols = 700, n_tokens = 50;
  const std::vector<float> wf = random_vec(n_rows * n_cols, 3);
  const WeightMatrix w{GgmlType::kF32, reinterpret_cast<const uint8_t*>(wf.data()), n_rows, n_cols,
                       sizeof(float) * n_cols};
  const std::vector<float> x = random_vec(n_tokens * n_cols, 4);
  for (SimdTier tier : supported_simd_tiers()) {
    set_simd_tier_for_testing(tier);
    ThreadPool pool3(3), pool1(1);
    std::vector<float> all(n_tokens * n_rows);
    gemm_f32(w, x.data(), n_tokens, all.data(), pool3);
    for (int64_t t0 : {int64_t{0}, int64_t{17}, n_tokens - 2}) {
      std::vector<float> two(2 * n_rows);
      gemm_f32(w, x.data() + t0 * n_cols, 2, two.data(), pool1);
      for (int64_t i = 0; i < 2 * n_rows; ++i)
        ASSERT_EQ(two[i], all[t0 * n_rows + i]) << simd_tier_name(tier) << " t0=" << t0 << " i=" << i;
    }
  }
}

// Each tier's panel pack (register transposes) lays out exactly what the scalar pack does:
// whole blocks, a column tail, a short last group (zero rows), a row stride wider than kc.
TEST_F(GemmF32Test, EveryTierPacksPanelsAsTheScalarPack) {
  const std::vector<float> rows = random_vec(32 * 300, 21);
  for (SimdTier tier : supported_simd_tiers()) {
    set_simd_tier_for_testing(tier);
    const GemmF32Kernels& kern = gemm_f32_kernels();
    for (int n_rows : {kern.nr, kern.nr - 3, 1}) {
      for (int64_t kc : {int64_t{256}, int64_t{92}, int64_t{7}}) {
        std::vector<float> got(kc * kern.nr, NAN), want(kc * kern.nr, NAN);
        kern.pack(rows.data(), 300, n_rows, kc, kern.nr, got.data());
        gemm_f32_pack_scalar(rows.data(), 300, n_rows, kc, kern.nr, want.data());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << simd_tier_name(tier) << " n_rows=" << n_rows << " kc=" << kc << " i=" << i;
      }
    }
  }
}

// The fused call (Q/K/V, gate/up of a ViT block) gives each target the bits gemm_f32 gives it
// alone: matrices of different heights and formats, partial panels, every tier, 1 and 3 threads.
TEST_F(GemmF32Test, FusedTargetsEqualSeparateCallsBitForBit) {
  const int64_t n_cols = 512, n_tokens = 37;
  const int64_t heights[3] = {45, 300, 7};
  const GgmlType types[3] = {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16};
  std::vector<std::vector<uint8_t>> bytes(3);
  std::vector<WeightMatrix> ws;
  for (int i = 0; i < 3; ++i) {
    const WeightFormat* fmt = find_weight_format(types[i]);
    ASSERT_NE(fmt, nullptr);
    const size_t rb = static_cast<size_t>(n_cols / fmt->block_elems) * fmt->block_bytes;
    bytes[i].resize(rb * heights[i]);
    const std::vector<float> src = random_vec(heights[i] * n_cols, 11 + i);
    for (int64_t r = 0; r < heights[i]; ++r) fmt->quantize_row_ref(&src[r * n_cols], bytes[i].data() + r * rb, n_cols);
    ws.push_back(WeightMatrix{types[i], bytes[i].data(), heights[i], n_cols, rb});
  }
  const std::vector<float> x = random_vec(n_tokens * n_cols, 12);
  for (SimdTier tier : supported_simd_tiers()) {
    set_simd_tier_for_testing(tier);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      std::vector<std::vector<float>> fused(3), alone(3);
      std::vector<MatvecTarget> targets;
      for (int i = 0; i < 3; ++i) {
        fused[i].assign(n_tokens * heights[i], NAN);
        alone[i].assign(n_tokens * heights[i], NAN);
        targets.push_back(MatvecTarget{&ws[i], fused[i].data()});
        gemm_f32(ws[i], x.data(), n_tokens, alone[i].data(), pool);
      }
      gemm_f32_fused(targets, x.data(), n_tokens, pool);
      for (int i = 0; i < 3; ++i)
        for (size_t j = 0; j < fused[i].size(); ++j)
          ASSERT_EQ(fused[i][j], alone[i][j]) << simd_tier_name(tier) << " threads=" << threads << " target=" << i
                                              << " j=" << j;
    }
  }
}

// Double-precision softmax attention. Tolerance per output, relative to max |v|: logits carry
// gamma_d * scale * sum_c |q_c k_c| (at most L over the keys), which moves each weight by a
// relative e^{2L} - 1 ~ 2L and the weighted mean by <= 2L max|v|; the f32 sums of n weights and
// of n weighted values add 2 gamma_n; the exp polynomial's 2e-7 relative error (exp_poly.h)
// twice, and a few roundings for the rescales: 8u.
TEST_F(GemmF32Test, AttentionMatchesDoubleReference) {
  struct Shape { int64_t n, n_heads, head_dim; };
  for (const Shape sh : {Shape{1, 2, 16}, Shape{5, 3, 72}, Shape{37, 2, 80}, Shape{300, 2, 64}, Shape{600, 1, 40}}) {
    const int64_t dim = sh.n_heads * sh.head_dim;
    // Keys grow along the sequence, so later key blocks raise the running max (the rescale path).
    std::vector<float> q = random_vec(sh.n * dim, 11, -2.0f, 2.0f), k = random_vec(sh.n * dim, 12, -1.0f, 1.0f),
                       v = random_vec(sh.n * dim, 13, -3.0f, 3.0f);
    for (int64_t t = 0; t < sh.n; ++t)
      for (int64_t c = 0; c < dim; ++c) k[t * dim + c] *= 1.0f + 3.0f * static_cast<float>(t) / static_cast<float>(sh.n);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    std::vector<double> ref(sh.n * dim);
    double max_l = 0;
    for (int64_t h = 0; h < sh.n_heads; ++h)
      for (int64_t t = 0; t < sh.n; ++t) {
        std::vector<double> logit(sh.n);
        double mx = -1e300;
        for (int64_t j = 0; j < sh.n; ++j) {
          double s = 0, mag = 0;
          for (int64_t c = 0; c < sh.head_dim; ++c) {
            const double p = static_cast<double>(q[t * dim + h * sh.head_dim + c]) * k[j * dim + h * sh.head_dim + c];
            s += p;
            mag += std::fabs(p);
          }
          logit[j] = s * scale;
          max_l = std::max(max_l, mag * scale);
          mx = std::max(mx, logit[j]);
        }
        double sum = 0;
        for (double& l : logit) sum += (l = std::exp(l - mx));
        for (int64_t c = 0; c < sh.head_dim; ++c) {
          double o = 0;
          for (int64_t j = 0; j < sh.n; ++j) o += logit[j] * v[j * dim + h * sh.head_dim + c];
          ref[t * dim + h * sh.head_dim + c] = o / sum;
        }
      }
    const double gd = sh.head_dim * kU / (1 - sh.head_dim * kU), gn = sh.n * kU / (1 - sh.n * kU);
    const double tol = (2 * gd * max_l + 2 * gn + 4e-7 + 8 * kU) * 3.0;  // max |v| = 3
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> out(sh.n * dim, NAN);
        attention_f32(q.data(), k.data(), v.data(), sh.n, sh.n_heads, sh.head_dim, scale, out.data(), pool);
        for (int64_t i = 0; i < sh.n * dim; ++i)
          ASSERT_NEAR(out[i], ref[i], tol) << "n=" << sh.n << " tier=" << simd_tier_name(tier)
                                           << " threads=" << threads << " i=" << i;
      }
    }
  }
}

// The softmax kernels alone: exp_sum within the polynomial's bound of std::exp on the whole
// clamped range, row_max exact, on lengths that leave SIMD tails.
TEST_F(GemmF32Test, ExpSumAndRowMaxMatchTheLibrary) {
  for (SimdTier tier : supported_simd_tiers()) {
    set_simd_tier_for_testing(tier);
    const GemmF32Kernels& k = gemm_f32_kernels();
    for (int64_t n : {1, 7, 16, 33, 1000}) {
      std::vector<float> s = random_vec(n, 21, -80.0f, 80.0f);
      ASSERT_EQ(k.row_max(s.data(), n), *std::max_element(s.begin(), s.end()));
      const std::vector<float> in = s;
      const float shift = 0.5f;
      const float sum = k.exp_sum(s.data(), n, 1.0f, shift);
      double ref_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double e = std::exp(static_cast<double>(in[i] - shift));  // in - shift: rounded as the kernel does
        ref_sum += s[i];
        // 2e-7 polynomial + a few roundings (range reduction, 2^n scaling): 4e-7 relative.
        ASSERT_NEAR(s[i], e, 4e-7 * e) << simd_tier_name(tier) << " x=" << in[i];
      }
      ASSERT_NEAR(sum, ref_sum, n * kU * ref_sum) << simd_tier_name(tier);
    }
  }
}

}  // namespace
}  // namespace vlkv
