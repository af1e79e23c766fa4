// gemm_q8 over the unpacked block formats (Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): bit equality
// with the block steps of quant/q8_0_gemm.h at every SIMD tier and thread count, and a stated
// bound against the exact dot of the reference weights with the rounded activations and against
// the decode dot (dot_q8), tight enough that a changed weight byte fails it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/gemm_q8.h"
#include "kernels/matmul.h"
#include "quant/gemm_unpack.h"
#include "quant/k_packed.h"
#include "quant/q8_activations.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

const GgmlType kTypes[] = {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

struct Matrix {
  std::vector<uint8_t> bytes;  // [n_rows, row_bytes]
  WeightMatrix w;
};

Matrix make_matrix(GgmlType type, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  const WeightFormat* fmt = find_weight_format(type);
  Matrix m;
  m.w = WeightMatrix{type, nullptr, n_rows, n_cols, static_cast<size_t>(n_cols / fmt->block_elems) * fmt->block_bytes};
  m.w.round_activations_q8 = true;
  m.bytes.resize(static_cast<size_t>(n_rows) * m.w.row_bytes);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (auto& v : src) v = dist(rng) + (r % 3 == 0 ? 0.7f : 0.0f);  // some rows off-centre: large minima
    fmt->quantize_row_ref(src.data(), m.bytes.data() + r * m.w.row_bytes, n_cols);
  }
  m.w.data = m.bytes.data();
  return m;
}

std::vector<float> make_x(int64_t n_tokens, int64_t n_cols, uint32_t seed) {
  std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 40.0f;  // some blocks reach +-127, others stay small
  return x;
}

// One weight row unpacked (gemm_unpack.h, itself checked against the reference in
// tests/quant/gemm_unpack_test.cpp).
struct Unpacked {
  int groups = 1;
  std::vector<int8_t> q;
  std::vector<float> dw, off;
  std::vector<int32_t> bias;
};
Unpacked unpack_row(const WeightMatrix& w, int64_t r) {
  const quant::GemmUnpackFormat* uf = quant::find_gemm_unpack(w.type);
  Unpacked u;
  u.groups = uf->split ? 2 : 1;
  u.q.resize(static_cast<size_t>(w.n_cols));
  u.dw.resize(static_cast<size_t>(w.n_cols / 32 * u.groups));
  u.bias.resize(u.dw.size());
  u.off.assign(static_cast<size_t>(w.n_cols / 32), 0.0f);
  uf->unpack(w.data + r * w.row_bytes, w.n_cols / uf->block_elems, u.q.data(), u.dw.data(), u.bias.data(),
             uf->offset ? u.off.data() : nullptr);
  return u;
}

// The block steps of quant/q8_0_gemm.h for one (weight row, activation row), in plain C++;
// mag (if given) gets the sum of |products| of weight and activation terms, the scale of any
// f32 summation's rounding error.
float block_steps(const Unpacked& u, bool offset, const Q8Activations& xq, int64_t n_cols, double* mag = nullptr) {
  float acc = 0.0f;
  double m = 0.0;
  const int per = 32 / u.groups;
  for (int64_t b = 0; b < n_cols / 32; ++b) {
    const float dx = xq.d[static_cast<size_t>(b)];
    int32_t xsum = 0;
    for (int g = 0; g < u.groups; ++g) {
      int32_t s = 0;
      double sa = 0.0;
      for (int j = 0; j < per; ++j) {
        const size_t k = static_cast<size_t>(b * 32 + g * per + j);
        s += u.q[k] * xq.q[k];
        sa += std::fabs(static_cast<double>(u.q[k]) * xq.q[k]);
        xsum += xq.q[k];
      }
      const float dw = u.dw[static_cast<size_t>(b * u.groups + g)];
      acc = std::fma(static_cast<float>(s), dw * dx, acc);
      m += sa * std::fabs(static_cast<double>(dw) * dx);
    }
    if (offset) {
      const float o = u.off[static_cast<size_t>(b)];
      acc = std::fma(o, dx * static_cast<float>(xsum), acc);
      double xa = 0.0;
      for (int j = 0; j < 32; ++j) xa += std::abs(xq.q[static_cast<size_t>(b * 32 + j)]);
      m += std::fabs(static_cast<double>(o) * dx) * xa;
    }
  }
  if (mag) *mag = m;
  return acc;
}

// The exact dot (in double) of the reference weights with the rounded activations.
double exact_dot(const WeightFormat& fmt, const uint8_t* row, const Q8Activations& xq, int64_t n_cols) {
  std::vector<float> w(static_cast<size_t>(n_cols));
  fmt.dequantize_row_ref(row, w.data(), n_cols);
  double s = 0.0;
  for (int64_t j = 0; j < n_cols; ++j)
    s += static_cast<double>(w[static_cast<size_t>(j)]) * xq.q[static_cast<size_t>(j)] * xq.d[static_cast<size_t>(j / 32)];
  return s;
}

// f32 sums of at most (n_cols / 16 + 4) roundings, each at most 2^-24 of a partial sum or
// product bounded by mag: both the GEMM's steps and the decode dot's lanes, hsum and bias.
double bound(int64_t n_cols, double mag) { return static_cast<double>(n_cols / 16 + 8) * mag * 0x1p-24; }

class GemmBlockFormatsTest : public ::testing::Test {
 protected:
  void TearDown() override { set_simd_tier_for_testing(simd_tier_default()); }
};

TEST_F(GemmBlockFormatsTest, EqualsBlockStepsAtEveryTierAndIsWithinBoundOfExactAndDecode) {
  struct Shape { int64_t n_rows, n_cols, n_tokens; };
  // 130 rows: three tasks, the last of 2 rows; 1280 columns: a K chunk of 1024 and one of 256;
  // tokens 3/17/40: partial, split and several panels; 9 rows: a partial weight tile.
  const Shape shapes[] = {{9, 256, 3}, {130, 1280, 17}, {20, 2048, 40}};
  for (GgmlType type : kTypes) {
    const WeightFormat* fmt = find_weight_format(type);
    const bool offset = quant::find_gemm_unpack(type)->offset;
    for (const Shape& s : shapes) {
      const Matrix m = make_matrix(type, s.n_rows, s.n_cols, 7 + static_cast<uint32_t>(s.n_rows));
      ASSERT_TRUE(gemm_q8_applies(m.w)) << ggml_type_name(type);
      const std::vector<float> x = make_x(s.n_tokens, s.n_cols, 3 + static_cast<uint32_t>(s.n_tokens));
      std::vector<Q8Activations> xq(static_cast<size_t>(s.n_tokens));
      for (int64_t t = 0; t < s.n_tokens; ++t) quantize_activations_q8(&x[t * s.n_cols], s.n_cols, xq[t]);
      std::vector<Unpacked> rows;
      for (int64_t r = 0; r < s.n_rows; ++r) rows.push_back(unpack_row(m.w, r));
      for (SimdTier tier : supported_simd_tiers()) {
        set_simd_tier_for_testing(tier);
        for (int threads : {1, 3}) {
          ThreadPool pool(threads);
          std::vector<float> y(static_cast<size_t>(s.n_tokens * s.n_rows), -1.0f);
          gemm_q8(m.w, x.data(), s.n_tokens, y.data(), pool);
          for (int64_t t = 0; t < s.n_tokens; ++t)
            for (int64_t r = 0; r < s.n_rows; ++r) {
              const float got = y[t * s.n_rows + r];
              double mag = 0.0;
              // Tolerance 0: exact integer sums and the same f32 steps at every tier.
              ASSERT_EQ(got, block_steps(rows[r], offset, xq[t], s.n_cols, &mag))
                  << ggml_type_name(type) << " " << simd_tier_name(tier) << " cols " << s.n_cols << " t " << t << " r " << r;
              const uint8_t* row = m.w.data + r * m.w.row_bytes;
              ASSERT_NEAR(got, exact_dot(*fmt, row, xq[t], s.n_cols), bound(s.n_cols, mag))
                  << ggml_type_name(type) << " " << simd_tier_name(tier) << " t " << t << " r " << r;
              ASSERT_NEAR(got, fmt->dot_q8(row, xq[t], s.n_cols), 2 * bound(s.n_cols, mag))
                  << ggml_type_name(type) << " " << simd_tier_name(tier) << " t " << t << " r " << r;
            }
        }
      }
    }
  }
}

// Every code bit set (the largest codes: Q4_K 15, Q5_K 31, Q6_K 63, ...) against activations of
// +-127: the largest integer sums, which plain AVX2 partly keeps in 16 bits (q8_0_gemm_x86.h);
// still the block steps bit for bit (tolerance 0) at every tier.
TEST_F(GemmBlockFormatsTest, EqualsBlockStepsAtTheLargestCodes) {
  struct Codes { GgmlType type; size_t begin, end; };  // each block's code bytes (quant/block_layouts.h)
  const Codes codes[] = {{GgmlType::kQ4_1, 4, 20},  {GgmlType::kQ5_0, 2, 22},   {GgmlType::kQ5_1, 4, 24},
                         {GgmlType::kQ4_K, 16, 144}, {GgmlType::kQ5_K, 16, 176}, {GgmlType::kQ6_K, 0, 192}};
  constexpr int64_t kRows = 9, kCols = 512, kTokens = 2;
  for (const Codes& c : codes) {
    Matrix m = make_matrix(c.type, kRows, kCols, 41);  // reference scales and minima
    const size_t block_bytes = find_weight_format(c.type)->block_bytes;
    for (size_t blk = 0; blk < m.bytes.size(); blk += block_bytes)
      std::memset(m.bytes.data() + blk + c.begin, 0xFF, c.end - c.begin);
    std::vector<float> x(static_cast<size_t>(kTokens * kCols), 1.0f);
    std::fill(x.begin() + kCols, x.end(), -1.0f);
    std::vector<Q8Activations> xq(kTokens);
    for (int64_t t = 0; t < kTokens; ++t) quantize_activations_q8(&x[t * kCols], kCols, xq[t]);
    ASSERT_EQ(xq[1].q[0], -127);
    const bool offset = quant::find_gemm_unpack(c.type)->offset;
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      ThreadPool pool(1);
      std::vector<float> y(static_cast<size_t>(kTokens * kRows), -1.0f);
      gemm_q8(m.w, x.data(), kTokens, y.data(), pool);
      for (int64_t t = 0; t < kTokens; ++t)
        for (int64_t r = 0; r < kRows; ++r)
          EXPECT_EQ(y[t * kRows + r], block_steps(unpack_row(m.w, r), offset, xq[t], kCols))
              << ggml_type_name(c.type) << " " << simd_tier_name(tier) << " t " << t << " r " << r;
    }
  }
}

// The bound above is tight enough to see one weight byte changed: a code nibble, a high-bit
// byte or a scale byte of row 0, with the reference taken from the unchanged bytes.
TEST_F(GemmBlockFormatsTest, AChangedWeightByteBreaksTheBound) {
  const int64_t n_cols = 512, n_tokens = 8;
  const std::vector<float> x = make_x(n_tokens, n_cols, 11);
  std::vector<Q8Activations> xq(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) quantize_activations_q8(&x[t * n_cols], n_cols, xq[t]);
  ThreadPool pool(2);
  for (GgmlType type : kTypes) {
    const WeightFormat* fmt = find_weight_format(type);
    Matrix m = make_matrix(type, 4, n_cols, 3);
    const std::vector<uint8_t> original = m.bytes;
    std::vector<double> ref(n_tokens), mag(n_tokens);
    const Unpacked u = unpack_row(m.w, 0);
    for (int64_t t = 0; t < n_tokens; ++t) {
      ref[t] = exact_dot(*fmt, original.data(), xq[t], n_cols);
      block_steps(u, quant::find_gemm_unpack(type)->offset, xq[t], n_cols, &mag[t]);
    }
    // Bytes of the first block: the middle one is a code byte in every format; 4 and 6
    // are scale, min or fifth-bit bytes (Q4_K/Q5_K scales, Q5_0/Q5_1 qh, Q4_1 codes, Q6_K ql).
    for (size_t at : {fmt->block_bytes / 2, size_t{4}, size_t{6}, fmt->block_bytes - 3}) {
      m.bytes = original;
      m.bytes[at] ^= 0x24;
      m.w.data = m.bytes.data();
      std::vector<float> y(static_cast<size_t>(n_tokens * 4));
      gemm_q8(m.w, x.data(), n_tokens, y.data(), pool);
      double worst = 0.0;
      for (int64_t t = 0; t < n_tokens; ++t) worst = std::max(worst, std::fabs(y[t * 4] - ref[t]) / bound(n_cols, mag[t]));
      EXPECT_GT(worst, 1.0) << ggml_type_name(type) << " byte " << at << " changed, yet every token is within the bound";
    }
  }
}

// Prefill through matmul takes the GEMM for a Q4_K matrix that rounds activations; each row is
// within the bound of that token's decode matmul (one row, dot_q8); --exact-matmul
// (round_activations_q8 off) keeps the exact f32 tiles.
TEST_F(GemmBlockFormatsTest, MatmulPrefillUsesTheGemmAndStaysNearDecode) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    Matrix m = make_matrix(type, 70, 512, 21);
    const int64_t n_tokens = 20;
    const std::vector<float> x = make_x(n_tokens, 512, 22);
    ThreadPool pool(2);
    std::vector<float> y(static_cast<size_t>(n_tokens * 70)), via_gemm(y.size()), one(70), exact(y.size());
    matmul(m.w, x.data(), n_tokens, y.data(), pool);
    gemm_q8(m.w, x.data(), n_tokens, via_gemm.data(), pool);
    EXPECT_EQ(y, via_gemm) << ggml_type_name(type);
    Q8Activations xq;
    for (int64_t t = 0; t < n_tokens; ++t) {
      matmul(m.w, &x[t * 512], 1, one.data(), pool);
      quantize_activations_q8(&x[t * 512], 512, xq);
      for (int64_t r = 0; r < 70; ++r) {
        double mag = 0.0;
        block_steps(unpack_row(m.w, r), quant::find_gemm_unpack(type)->offset, xq, 512, &mag);
        ASSERT_NEAR(y[t * 70 + r], one[r], 2 * bound(512, mag)) << ggml_type_name(type) << " t " << t << " r " << r;
      }
    }
    m.w.round_activations_q8 = false;
    EXPECT_FALSE(gemm_q8_applies(m.w));
    matmul(m.w, x.data(), n_tokens, exact.data(), pool);
    EXPECT_NE(exact, y);  // the exact path does not round activations
  }
}

// Q4_K, Q5_K and Q6_K decode (matmul_decode: the strided matvec of quant/k_strided.h, 16 rows per
// call) takes the GEMM's block steps, so on x86 above scalar a decode row equals the prefill row bit for
// bit (tolerance 0): 37 rows (two full calls and an odd 5-row tail), 1 and 3 decode rows, 1 and 3 threads.
TEST_F(GemmBlockFormatsTest, KQuantDecodeEqualsPrefillBitForBit) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const Matrix m = make_matrix(type, 37, 768, 31);
    const int64_t n_tokens = 3;
    const std::vector<float> x = make_x(n_tokens, 768, 32);
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      // only the tiers with the strided kernels (x86 above scalar); scalar's dot_q8 is the
      // double-precision reference, ARM's its own NEON dots
      if (find_weight_format(type)->kernels().dot_q8_strided == nullptr) continue;
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> prefill(static_cast<size_t>(n_tokens * 37)), decode(prefill.size(), -1.0f);
        gemm_q8(m.w, x.data(), n_tokens, prefill.data(), pool);
        matmul_decode(m.w, x.data(), 1, decode.data(), pool);
        matmul_decode(m.w, x.data() + 768, 2, decode.data() + 37, pool);
        EXPECT_EQ(decode, prefill) << ggml_type_name(type) << " " << simd_tier_name(tier) << " threads " << threads;
      }
    }
  }
}

// The same matrices repacked 8 rows at a time (quant/k_packed.h): the GEMM (which unpacks the
// packed rows per chunk) equals the GEMM of the file layout at every tier, and decode through the
// packed kernel equals it on the tiers above scalar, bit for bit (tolerance 0): 40 rows (5
// groups), 1 and 3 decode rows, 1 and 3 threads (chunks that cut a group compute it whole).
TEST_F(GemmBlockFormatsTest, KQuantPackedDecodeEqualsPrefillBitForBit) {
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const Matrix m = make_matrix(type, 40, 768, 33);
    std::vector<uint8_t> bytes(m.bytes.size());
    quant::pack_rows8(type, m.bytes.data(), 40, m.w.row_bytes, bytes.data());
    WeightMatrix packed = m.w;
    packed.data = bytes.data();
    packed.packed_rows8 = true;
    const int64_t n_tokens = 3;
    const std::vector<float> x = make_x(n_tokens, 768, 34);
    for (SimdTier tier : supported_simd_tiers()) {
      set_simd_tier_for_testing(tier);
      const bool strided = find_weight_format(type)->kernels().dot_q8_strided != nullptr;
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> plain(static_cast<size_t>(n_tokens * 40)), prefill(plain.size()), decode(plain.size(), -1.0f);
        gemm_q8(m.w, x.data(), n_tokens, plain.data(), pool);
        gemm_q8(packed, x.data(), n_tokens, prefill.data(), pool);
        EXPECT_EQ(prefill, plain) << ggml_type_name(type) << " " << simd_tier_name(tier) << " threads " << threads;
        matmul_decode(packed, x.data(), 1, decode.data(), pool);
        matmul_decode(packed, x.data() + 768, 2, decode.data() + 40, pool);
        if (strided) {  // scalar's dot_q8 is the double-precision reference, ARM's its own NEON dots
          EXPECT_EQ(decode, prefill) << ggml_type_name(type) << " " << simd_tier_name(tier) << " threads " << threads;
        } else {
          std::vector<float> unpacked(plain.size(), -2.0f);
          matmul_decode(m.w, x.data(), 1, unpacked.data(), pool);
          matmul_decode(m.w, x.data() + 768, 2, unpacked.data() + 40, pool);
          EXPECT_EQ(decode, unpacked) << ggml_type_name(type) << " " << simd_tier_name(tier);
        }
      }
    }
  }
}

}  // namespace
}  // namespace vlkv
