// gemm_q8 (the prefill int8 GEMM) against the decode dot and a block-step reference, at every
// SIMD tier, thread count and edge shape (partial panels, tasks, K chunks and weight tiles).
#include "kernels/gemm_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/matmul.h"
#include "quant/q8_activations.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

struct Q8Matrix {
  std::vector<uint8_t> bytes;  // [n_rows, row_bytes]
  WeightMatrix w;
};

// Rows quantized from normal floats; raw: random code bytes (-128 included) and scales instead.
Q8Matrix make_q8_0(int64_t n_rows, int64_t n_cols, uint32_t seed, bool raw = false) {
  const WeightFormat* fmt = find_weight_format(GgmlType::kQ8_0);
  Q8Matrix m;
  m.w = WeightMatrix{GgmlType::kQ8_0, nullptr, n_rows, n_cols, static_cast<size_t>(n_cols / 32 * 34)};
  m.w.round_activations_q8 = true;
  m.bytes.resize(static_cast<size_t>(n_rows) * m.w.row_bytes);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = m.bytes.data() + r * m.w.row_bytes;
    if (raw) {
      for (int64_t b = 0; b < n_cols / 32; ++b) {
        const uint16_t h = fp32_to_fp16(std::ldexp(1.0f + static_cast<float>(rng() % 100) / 100.0f, -(int)(rng() % 12)));
        std::memcpy(row + b * 34, &h, 2);
        for (int j = 0; j < 32; ++j) row[b * 34 + 2 + j] = static_cast<uint8_t>(rng());
      }
      continue;
    }
    for (auto& v : src) v = dist(rng);
    fmt->quantize_row_ref(src.data(), row, n_cols);
  }
  m.w.data = m.bytes.data();
  return m;
}

std::vector<float> make_x(int64_t n_tokens, int64_t n_cols, uint32_t seed) {
  std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  // a few large values, so some blocks' codes reach +-127 and others stay small
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 40.0f;
  return x;
}

// The block steps of quant/q8_0_gemm.h for one (weight row, activation row), in plain C++.
float block_steps(const uint8_t* row, const Q8Activations& xq, int64_t n_cols) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n_cols / 32; ++b) {
    uint16_t h;
    std::memcpy(&h, row + b * 34, 2);
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += static_cast<int8_t>(row[b * 34 + 2 + j]) * xq.q[static_cast<size_t>(b * 32 + j)];
    acc = std::fma(static_cast<float>(s), fp16_to_fp32(h) * xq.d[static_cast<size_t>(b)], acc);
  }
  return acc;
}

// Sum over blocks of |block sum * dw * dx|: the scale of the f32 steps' rounding errors.
double abs_block_terms(const uint8_t* row, const Q8Activations& xq, int64_t n_cols) {
  double mag = 0.0;
  for (int64_t b = 0; b < n_cols / 32; ++b) {
    uint16_t h;
    std::memcpy(&h, row + b * 34, 2);
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += static_cast<int8_t>(row[b * 34 + 2 + j]) * xq.q[static_cast<size_t>(b * 32 + j)];
    mag += std::fabs(static_cast<double>(s) * fp16_to_fp32(h) * xq.d[static_cast<size_t>(b)]);
  }
  return mag;
}

class GemmQ8Test : public ::testing::Test {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

// Tolerance 0 everywhere: integer block sums are exact and every path rounds the same f32
// steps, so any difference is a bug (a lost block, a wrong lane, a dropped bias).
TEST_F(GemmQ8Test, EqualsBlockStepsAndDecodeDotAtEveryTierShapeAndThreadCount) {
  const WeightFormat* fmt = find_weight_format(GgmlType::kQ8_0);
  struct Shape { int64_t n_rows, n_cols, n_tokens; bool raw; };
  // 130 rows: three tasks, the last of 2 rows; 1056 columns: a K chunk of 32 blocks and one of 1;
  // tokens 15/16/17/40: partial, exact and split panels.
  const Shape shapes[] = {{1, 32, 2, false},   {7, 96, 15, false},  {13, 1056, 17, false}, {130, 256, 16, false},
                          {70, 1056, 40, false}, {9, 2080, 3, true}, {64, 64, 33, true}};
  for (const Shape& s : shapes) {
    const Q8Matrix m = make_q8_0(s.n_rows, s.n_cols, 7 + static_cast<uint32_t>(s.n_rows), s.raw);
    const std::vector<float> x = make_x(s.n_tokens, s.n_cols, 3 + static_cast<uint32_t>(s.n_tokens));
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      std::vector<Q8Activations> xq(static_cast<size_t>(s.n_tokens));
      for (int64_t t = 0; t < s.n_tokens; ++t) quantize_activations_q8(&x[t * s.n_cols], s.n_cols, xq[t]);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(static_cast<size_t>(s.n_tokens * s.n_rows), -1.0f);
        gemm_q8(m.w, x.data(), s.n_tokens, y.data(), pool);
        for (int64_t t = 0; t < s.n_tokens; ++t)
          for (int64_t r = 0; r < s.n_rows; ++r) {
            const uint8_t* row = m.w.data + r * m.w.row_bytes;
            const float got = y[t * s.n_rows + r];
            ASSERT_EQ(got, block_steps(row, xq[t], s.n_cols))
                << simd_tier_name(tier) << " rows " << s.n_rows << " cols " << s.n_cols << " t " << t << " r " << r;
            if (tier != SimdTier::kScalar) {
              ASSERT_EQ(got, fmt->dot_q8(row, xq[t], s.n_cols)) << simd_tier_name(tier) << " t " << t << " r " << r;
            } else {
              // The scalar decode dot sums the same products in double: the f32 block steps
              // differ by at most one rounding (2^-24 relative) of the running sum per block,
              // bounded by n_blocks * 2^-24 * the sum of |block terms|.
              EXPECT_NEAR(got, fmt->dot_q8(row, xq[t], s.n_cols),
                          static_cast<double>(s.n_cols / 32 + 1) * abs_block_terms(row, xq[t], s.n_cols) * 0x1p-23);
            }
          }
      }
    }
  }
}

// Prefill through matmul takes the GEMM when the matrix rounds activations, and each of its
// rows equals that token's decode matmul (one row) bit for bit above scalar; --exact-matmul
// (round_activations_q8 off) keeps the exact f32 path, within 8-bit rounding of the GEMM.
TEST_F(GemmQ8Test, MatmulPrefillRowsEqualDecodeRowsAndExactStaysExact) {
  Q8Matrix m = make_q8_0(100, 512, 21);
  const int64_t n_tokens = 20;
  const std::vector<float> x = make_x(n_tokens, 512, 22);
  const WeightFormat* fmt = find_weight_format(GgmlType::kQ8_0);
  std::vector<float> deq(512);
  for (SimdTier tier : supported_simd_tiers()) {
    if (tier == SimdTier::kScalar) continue;
    set_simd_tier_for_testing(tier);
    ThreadPool pool(2);
    std::vector<float> y(static_cast<size_t>(n_tokens * 100)), one(100), exact(static_cast<size_t>(n_tokens * 100));
    m.w.round_activations_q8 = true;
    matmul(m.w, x.data(), n_tokens, y.data(), pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      matmul(m.w, &x[t * 512], 1, one.data(), pool);
      for (int64_t r = 0; r < 100; ++r) ASSERT_EQ(y[t * 100 + r], one[r]) << simd_tier_name(tier) << " " << t << " " << r;
    }
    m.w.round_activations_q8 = false;
    matmul(m.w, x.data(), n_tokens, exact.data(), pool);
    double max_rel = 0.0;
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < 100; ++r) {
        fmt->dequantize_row_ref(m.w.data + r * m.w.row_bytes, deq.data(), 512);
        double s = 0.0, mag = 0.0;
        for (int64_t c = 0; c < 512; ++c) {
          s += static_cast<double>(deq[c]) * x[t * 512 + c];
          mag += std::fabs(static_cast<double>(deq[c]) * x[t * 512 + c]);
        }
        // exact: f32 sums of 512 products, well within 1e-5 of their magnitude
        ASSERT_NEAR(exact[t * 100 + r], s, 1e-5 * mag);
        // rounded: each code is off by at most half a step, d/2 = amax/254: relative error of
        // the dot at most 1/254 of the sum of |w| * amax terms; the mean is far smaller
        ASSERT_NEAR(y[t * 100 + r], s, 0.02 * mag);
        max_rel = std::max(max_rel, std::fabs(y[t * 100 + r] - s) / mag);
      }
    EXPECT_GT(max_rel, 0.0);  // the GEMM path did round (not the exact path by accident)
  }
}

// Q4_0 takes the same block steps on its weights as Q8_0 blocks (codes q - 8, the same f16
// scale): bit for bit against those steps at every tier. Its decode dot orders the f32 sums
// differently: within (n_blocks + 8) roundings (2^-23 relative, generous) of the sum of |block terms|.
TEST_F(GemmQ8Test, Q4_0EqualsBlockStepsOfItsQ8_0Blocks) {
  const WeightFormat* q4 = find_weight_format(GgmlType::kQ4_0);
  const int64_t n_rows = 75, n_cols = 1088, n_tokens = 19;  // 34 blocks: a K chunk of 32 and one of 2
  WeightMatrix w{GgmlType::kQ4_0, nullptr, n_rows, n_cols, static_cast<size_t>(n_cols / 32 * 18)};
  w.round_activations_q8 = true;
  std::vector<uint8_t> bytes(static_cast<size_t>(n_rows) * w.row_bytes), as_q8(static_cast<size_t>(n_rows * n_cols / 32 * 34));
  std::mt19937 rng(31);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (auto& v : src) v = dist(rng);
    q4->quantize_row_ref(src.data(), bytes.data() + r * w.row_bytes, n_cols);
    for (int64_t b = 0; b < n_cols / 32; ++b) {  // the layout: weight j the low nibble of byte j, j + 16 the high
      const uint8_t* qb = bytes.data() + r * w.row_bytes + b * 18;
      uint8_t* ob = as_q8.data() + (r * (n_cols / 32) + b) * 34;
      std::memcpy(ob, qb, 2);
      for (int j = 0; j < 16; ++j) {
        ob[2 + j] = static_cast<uint8_t>((qb[2 + j] & 15) - 8);
        ob[18 + j] = static_cast<uint8_t>((qb[2 + j] >> 4) - 8);
      }
    }
  }
  w.data = bytes.data();
  const std::vector<float> x = make_x(n_tokens, n_cols, 32);
  ASSERT_TRUE(gemm_q8_applies(w));
  for (SimdTier tier : supported_simd_tiers()) {
    set_simd_tier_for_testing(tier);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> y(static_cast<size_t>(n_tokens * n_rows));
      matmul(w, x.data(), n_tokens, y.data(), pool);  // prefill: the GEMM
      Q8Activations xq;
      for (int64_t t = 0; t < n_tokens; ++t) {
        quantize_activations_q8(&x[t * n_cols], n_cols, xq);
        for (int64_t r = 0; r < n_rows; ++r) {
          const uint8_t* q8row = as_q8.data() + r * (n_cols / 32) * 34;
          const float got = y[t * n_rows + r];
          ASSERT_EQ(got, block_steps(q8row, xq, n_cols)) << simd_tier_name(tier) << " t " << t << " r " << r;
          ASSERT_NEAR(got, q4->dot_q8(bytes.data() + r * w.row_bytes, xq, n_cols),
                      static_cast<double>(n_cols / 32 + 8) * abs_block_terms(q8row, xq, n_cols) * 0x1p-23)
              << simd_tier_name(tier) << " t " << t << " r " << r;
        }
      }
    }
  }
}

TEST_F(GemmQ8Test, RefusesAMatrixWithoutRoundedActivations) {
  Q8Matrix m = make_q8_0(8, 64, 1);
  m.w.round_activations_q8 = false;
  EXPECT_FALSE(gemm_q8_applies(m.w));
  WeightMatrix f32{GgmlType::kF32, m.w.data, 8, 8, 32, true};
  EXPECT_FALSE(gemm_q8_applies(f32));
  WeightMatrix f16{GgmlType::kF16, m.w.data, 8, 16, 32, true};  // no int8 GEMM: exact tiles
  EXPECT_FALSE(gemm_q8_applies(f16));
  WeightMatrix q4k{GgmlType::kQ4_K, m.w.data, 1, 256, 144, true};
  EXPECT_TRUE(gemm_q8_applies(q4k));
  q4k.row_bytes = 143;  // rows shorter than their blocks
  EXPECT_FALSE(gemm_q8_applies(q4k));
  ThreadPool pool(1);
  std::vector<float> x(2 * 64), y(16);
  EXPECT_DEATH(gemm_q8(m.w, x.data(), 2, y.data(), pool), "gemm_q8");
}

}  // namespace
}  // namespace vlkv
