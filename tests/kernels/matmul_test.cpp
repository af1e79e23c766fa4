// matmul and get_row against a double-precision reference over the scalar
// dequantization of the real weight-format table, at every SIMD level and thread count.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/ops.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

struct QuantMatrix {
  std::vector<uint8_t> bytes;  // [n_rows, row_bytes]
  std::vector<float> deq;      // [n_rows, n_cols] exact dequantization (scalar reference)
  WeightMatrix w;
};

QuantMatrix make_matrix(GgmlType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  const WeightFormat* fmt = find_weight_format(type);
  EXPECT_NE(fmt, nullptr) << ggml_type_name(type);
  QuantMatrix m;
  auto rb = row_bytes(type, n_cols);
  EXPECT_TRUE(rb.is_ok());
  m.w = WeightMatrix{type, nullptr, n_rows, n_cols, rb.value()};
  m.bytes.resize(n_rows * m.w.row_bytes);
  m.deq.resize(n_rows * n_cols);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(n_cols);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (auto& v : src) v = dist(rng);
    fmt->quantize_row_ref(src.data(), m.bytes.data() + r * m.w.row_bytes, n_cols);
    fmt->dequantize_row_ref(m.bytes.data() + r * m.w.row_bytes, m.deq.data() + r * n_cols, n_cols);
  }
  m.w.data = m.bytes.data();
  return m;
}

struct Case {
  GgmlType type;
  int64_t n_rows;
  int64_t n_cols;
};

class MatmulTest : public ::testing::TestWithParam<Case> {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

TEST_P(MatmulTest, MatchesDoubleReferenceAtEveryLevelAndThreadCount) {
  const Case c = GetParam();
  const QuantMatrix m = make_matrix(c.type, c.n_rows, c.n_cols, 1234);
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t n_tokens : {1, 3, 17, 64}) {
    std::vector<float> x(n_tokens * c.n_cols);  // [n_tokens, n_cols]
    for (auto& v : x) v = dist(rng);
    // ref[t][r] in double, and the scale of its terms for the tolerance.
    std::vector<double> ref(n_tokens * c.n_rows), mag(n_tokens * c.n_rows);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < c.n_rows; ++r) {
        double s = 0.0, a = 0.0;
        for (int64_t i = 0; i < c.n_cols; ++i) {
          const double p = static_cast<double>(m.deq[r * c.n_cols + i]) * x[t * c.n_cols + i];
          s += p;
          a += std::fabs(p);
        }
        ref[t * c.n_rows + r] = s;
        mag[t * c.n_rows + r] = a;
      }
    }
    for (SimdLevel level : supported_simd_levels()) {
      set_simd_level_for_testing(level);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(n_tokens * c.n_rows, NAN);  // [n_tokens, n_rows]
        matmul(m.w, x.data(), n_tokens, y.data(), pool);
        for (int64_t i = 0; i < n_tokens * c.n_rows; ++i) {
          // f32 accumulation of n_cols terms: error grows ~ sqrt(n) * eps * sum|terms|.
          const double tol = 2e-6 * std::sqrt(static_cast<double>(c.n_cols)) * mag[i] + 1e-6;
          ASSERT_NEAR(y[i], ref[i], tol)
              << ggml_type_name(c.type) << " level=" << simd_level_name(simd_level())
              << " threads=" << threads << " n_tokens=" << n_tokens << " t=" << i / c.n_rows
              << " r=" << i % c.n_rows;
        }
      }
    }
  }
}

TEST_P(MatmulTest, GetRowIsExactDequantization) {
  const Case c = GetParam();
  const QuantMatrix m = make_matrix(c.type, c.n_rows, c.n_cols, 77);
  std::vector<float> out(c.n_cols);
  for (SimdLevel level : supported_simd_levels()) {
    set_simd_level_for_testing(level);
    for (int64_t r : {int64_t{0}, c.n_rows / 2, c.n_rows - 1}) {
      get_row(m.w, r, out.data());
      for (int64_t i = 0; i < c.n_cols; ++i) ASSERT_EQ(out[i], m.deq[r * c.n_cols + i]) << r << " " << i;
    }
  }
}

// Odd row counts (not multiples of the row block or tile); column counts above the
// 2048-column tile chunk and, for f32/f16, not a multiple of the SIMD width.
INSTANTIATE_TEST_SUITE_P(
    Formats, MatmulTest,
    ::testing::Values(Case{GgmlType::kF32, 37, 2053}, Case{GgmlType::kF32, 5, 19},
                      Case{GgmlType::kF16, 37, 2053}, Case{GgmlType::kF16, 1, 7},
                      Case{GgmlType::kQ8_0, 37, 2080}, Case{GgmlType::kQ8_0, 3, 32},
                      Case{GgmlType::kQ4_K, 37, 2304}, Case{GgmlType::kQ4_K, 17, 256}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(ggml_type_name(info.param.type)) + "_" + std::to_string(info.param.n_rows) +
             "x" + std::to_string(info.param.n_cols);
    });

TEST(Matmul, WeightRowsWithPaddingStride) {
  // row_bytes larger than the packed row (a view into a wider tensor) must be honoured.
  const int64_t n_rows = 9, n_cols = 40, stride = 48;
  std::vector<float> data(n_rows * stride, 1000.0f);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_cols; ++c) data[r * stride + c] = static_cast<float>(r - c) * 0.25f;
  WeightMatrix w{GgmlType::kF32, reinterpret_cast<const uint8_t*>(data.data()), n_rows, n_cols,
                 stride * sizeof(float)};
  std::vector<float> x(5 * n_cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  ThreadPool pool(2);
  for (int64_t n_tokens : {1, 5}) {
    std::vector<float> y(n_tokens * n_rows);
    matmul(w, x.data(), n_tokens, y.data(), pool);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < n_rows; ++r) {
        double s = 0;
        for (int64_t c = 0; c < n_cols; ++c) s += data[r * stride + c] * x[t * n_cols + c];
        EXPECT_NEAR(y[t * n_rows + r], s, 1e-3) << t << " " << r;
      }
  }
}

// Fused decode matvecs equal one matmul per matrix bit for bit, with and without 8-bit
// activations, for mixed formats and thread counts (chunks split across matrices).
TEST(Matmul, FusedMatvecsEqualSeparateMatmuls) {
  for (bool q8 : {false, true}) {
    QuantMatrix a = make_matrix(GgmlType::kQ8_0, 300, 256, 1);
    QuantMatrix b = make_matrix(GgmlType::kQ4_K, 37, 256, 2);
    QuantMatrix c = make_matrix(GgmlType::kQ8_0, 65, 256, 3);
    for (QuantMatrix* m : {&a, &b, &c}) m->w.round_activations_q8 = q8;
    std::vector<float> x(256);
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto& v : x) v = dist(rng);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> ya(300), yb(37), yc(65), ra(300), rb(37), rc(65);
      const MatvecTarget targets[] = {{&a.w, ya.data()}, {&b.w, yb.data()}, {&c.w, yc.data()}};
      matvec_fused(targets, x.data(), pool);
      matmul(a.w, x.data(), 1, ra.data(), pool);
      matmul(b.w, x.data(), 1, rb.data(), pool);
      matmul(c.w, x.data(), 1, rc.data(), pool);
      EXPECT_EQ(ya, ra) << q8 << " " << threads;
      EXPECT_EQ(yb, rb) << q8 << " " << threads;
      EXPECT_EQ(yc, rc) << q8 << " " << threads;

      std::vector<float> out(300), up(300), ref(300);
      matvec_swiglu(a.w, a.w, x.data(), out.data(), pool);  // gate = up: silu(g) * g
      matmul(a.w, x.data(), 1, up.data(), pool);
      swiglu(up.data(), up.data(), 300, ref.data());
      EXPECT_EQ(out, ref) << q8 << " " << threads;
    }
  }
}

// A batched step's decode rows (matmul_decode, the fused loops with n_x rows) equal each
// row's own matmul bit for bit (tolerance 0: each row is the same dot product in the same
// order), and matmul_step's prompt block equals matmul over those rows. At AVX-512 VNNI Q8_0's
// decode rows go through dot_q8_lanes in groups of <= 15 (5, 13: one group; 16, 31: two and
// three), 2 rows and one row through dot_q8_strided (70 rows: a 6-row tail chunk).
TEST(Matmul, DecodeRowsOfABatchEqualOneRowMatmuls) {
  for (const int64_t n_x : {2, 5, 13, 16, 31})
  for (bool q8 : {false, true}) {
    for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kF16}) {
      QuantMatrix a = make_matrix(type, 70, 256, 11);
      a.w.round_activations_q8 = q8;
      const int64_t n_prompt = 3;
      std::vector<float> x((n_x + n_prompt) * 256);
      std::mt19937 rng(6);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (auto& v : x) v = dist(rng);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y((n_x + n_prompt) * 70), one(70), prompt(n_prompt * 70);
        matmul_step(a.w, x.data(), n_x, n_prompt, y.data(), pool);
        for (int64_t t = 0; t < n_x; ++t) {
          matmul(a.w, &x[t * 256], 1, one.data(), pool);
          EXPECT_EQ(std::vector<float>(y.begin() + t * 70, y.begin() + (t + 1) * 70), one) << q8 << " row " << t;
        }
        matmul(a.w, &x[n_x * 256], n_prompt, prompt.data(), pool);
        EXPECT_EQ(std::vector<float>(y.begin() + n_x * 70, y.end()), prompt) << q8;

        std::vector<float> out(n_x * 70), up(70), ref(70);
        matvec_swiglu(a.w, a.w, x.data(), out.data(), pool, n_x);
        for (int64_t t = 0; t < n_x; ++t) {
          matmul(a.w, &x[t * 256], 1, up.data(), pool);
          swiglu(up.data(), up.data(), 70, ref.data());
          EXPECT_EQ(std::vector<float>(out.begin() + t * 70, out.begin() + (t + 1) * 70), ref) << q8 << " row " << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace vlkv
