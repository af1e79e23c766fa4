// Checks shared by the weight-format tests (one file per format): every SIMD level of
// the fast paths against the scalar reference, quantize round trips, random block bytes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "quant/weight_format.h"

namespace vlkv::quant_test {

// Restores the SIMD level a test found when it ends.
class SimdLevelGuard {
 public:
  SimdLevelGuard() : saved_(simd_tier()) {}
  ~SimdLevelGuard() { set_simd_tier_for_testing(saved_); }

 private:
  SimdTier saved_;
};

// The levels this CPU runs, kScalar first.
inline std::vector<SimdLevel> available_levels() { return supported_simd_levels(); }

inline uint16_t random_finite_half(std::mt19937& rng) {
  // Any sign, exponent field 0..30 (subnormals included, no inf/nan), any mantissa.
  const uint32_t r = rng();
  return static_cast<uint16_t>((r & 0x8000u) | ((r >> 16) % 31u) << 10 | (r & 0x3ffu));
}

// Rewrites the fields of one block that random bytes must not fill (scales that could be
// inf/nan): random bytes elsewhere exercise every code pattern the decoder can meet.
using BlockFixup = std::function<void(uint8_t* block, std::mt19937& rng)>;

// A fixup that puts a random finite f16 at each byte offset (the block's f16 scales).
inline BlockFixup half_fields(std::initializer_list<size_t> offsets) {
  std::vector<size_t> offs(offsets);
  return [offs](uint8_t* block, std::mt19937& rng) {
    for (size_t o : offs) {
      const uint16_t h = random_finite_half(rng);
      std::memcpy(block + o, &h, 2);
    }
  };
}

inline std::vector<uint8_t> random_row(const WeightFormat& f, int64_t n, std::mt19937& rng, const BlockFixup& fixup) {
  const int64_t nb = n / f.block_elems;
  std::vector<uint8_t> row(static_cast<size_t>(nb) * f.block_bytes);
  for (auto& b : row) b = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < nb; ++b) fixup(row.data() + b * f.block_bytes, rng);
  return row;
}

inline std::vector<float> normal_floats(int64_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// The fast paths at every level against the reference, on one row of n elements:
// - dequantize_row == dequantize_row_ref bit for bit;
// - |dot - sum(double(w_ref[i]) * x[i])| <= (n/8 + 16) * 2^-24 * sum|w_ref[i] * x[i]|,
//   the worst-case f32 summation error of the slowest path (8 partial sums; SIMD paths
//   have more), since the dequantized weights themselves are exact.
// x is read from an odd address so the fast paths' unaligned loads are exercised.
inline void expect_fast_matches_reference(const WeightFormat& f, const std::vector<uint8_t>& row, int64_t n,
                                          std::mt19937& rng) {
  std::vector<float> ref(static_cast<size_t>(n));
  f.dequantize_row_ref(row.data(), ref.data(), n);
  std::vector<float> x_storage(static_cast<size_t>(n) + 1);
  float* x = x_storage.data() + 1;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) x[i] = dist(rng);
  double exact = 0, magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    exact += static_cast<double>(ref[i]) * x[i];
    magnitude += std::fabs(static_cast<double>(ref[i]) * x[i]);
  }
  const double tol = (static_cast<double>(n) / 8 + 16) * std::ldexp(1.0, -24) * magnitude;

  SimdLevelGuard guard;
  for (SimdLevel level : available_levels()) {
    set_simd_level_for_testing(level);
    SCOPED_TRACE(std::string(f.name) + " at " + simd_level_name(level) + ", n=" + std::to_string(n));
    std::vector<float> fast(static_cast<size_t>(n), -12345.0f);
    f.dequantize_row(row.data(), fast.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &ref[i], 4);
      std::memcpy(&b, &fast[i], 4);
      ASSERT_EQ(a, b) << "element " << i << ": ref " << ref[i] << " fast " << fast[i];
    }
    const float d = f.dot(row.data(), x, n);
    EXPECT_NEAR(d, exact, tol);
  }
}

// Relative RMS error of quantize_row_ref -> dequantize_row_ref on x.
inline double round_trip_rel_rmse(const WeightFormat& f, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(n / f.block_elems) * f.block_bytes);
  f.quantize_row_ref(x.data(), q.data(), n);
  std::vector<float> y(x.size());
  f.dequantize_row_ref(q.data(), y.data(), n);
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
    ref += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// The checks every format gets: for rows of 1, 3 and 7 blocks (plain types: odd lengths
// that leave SIMD tails), random bytes and quantized N(0,1) data through every level; the
// round trip of N(0,1) data within max_rel_rmse; a zero row quantizes to exact zeros.
inline void run_standard_checks(GgmlType type, double max_rel_rmse, const BlockFixup& fixup) {
  const WeightFormat* f = find_weight_format(type);
  ASSERT_NE(f, nullptr);
  std::mt19937 rng(1234 + static_cast<uint32_t>(type));
  std::vector<int64_t> lengths;
  if (f->block_elems == 1) {
    lengths = {1, 7, 33, 100, 257, 1031};
  } else {
    lengths = {f->block_elems, 3 * f->block_elems, 7 * f->block_elems};
  }
  for (int64_t n : lengths) {
    for (int rep = 0; rep < 4; ++rep) expect_fast_matches_reference(*f, random_row(*f, n, rng, fixup), n, rng);
    const std::vector<float> x = normal_floats(n, rng);
    std::vector<uint8_t> q(static_cast<size_t>(n / f->block_elems) * f->block_bytes);
    f->quantize_row_ref(x.data(), q.data(), n);
    expect_fast_matches_reference(*f, q, n, rng);
  }
  // Round trip over many blocks, so the bound is about the format and not one draw.
  const int64_t n_rt = 64 * std::max<int64_t>(f->block_elems, 32);
  const double rmse = round_trip_rel_rmse(*f, normal_floats(n_rt, rng));
  EXPECT_LE(rmse, max_rel_rmse) << f->name;
  std::printf("[ %s ] round-trip relative RMS error on N(0,1): %.5f (bound %.5f)\n", f->name, rmse, max_rel_rmse);

  const std::vector<float> zeros(static_cast<size_t>(f->block_elems * 2), 0.0f);
  std::vector<uint8_t> q(2 * f->block_bytes, 0xAB);
  f->quantize_row_ref(zeros.data(), q.data(), f->block_elems * 2);
  std::vector<float> y(zeros.size(), 1.0f);
  f->dequantize_row_ref(q.data(), y.data(), f->block_elems * 2);
  for (float v : y) EXPECT_EQ(v, 0.0f) << f->name;
}

// A hand-built row must decode to expected exactly, through the reference and every
// fast level, and dot with x[i] = 1 + i % 3 must agree with the exact sum.
inline void expect_row_decodes(GgmlType type, const std::vector<uint8_t>& bytes, const std::vector<float>& expected) {
  const WeightFormat* f = find_weight_format(type);
  ASSERT_NE(f, nullptr);
  const auto n = static_cast<int64_t>(expected.size());
  ASSERT_EQ(bytes.size(), row_bytes(type, n).value());
  std::vector<float> out(expected.size());
  f->dequantize_row_ref(bytes.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], expected[i]) << f->name << " ref, element " << i;
  std::vector<float> x(expected.size());
  double exact = 0, magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(1 + i % 3);
    exact += static_cast<double>(expected[i]) * x[i];
    magnitude += std::fabs(static_cast<double>(expected[i]) * x[i]);
  }
  SimdLevelGuard guard;
  for (SimdLevel level : available_levels()) {
    set_simd_level_for_testing(level);
    std::fill(out.begin(), out.end(), -1.0f);
    f->dequantize_row(bytes.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], expected[i]) << f->name << " at " << simd_level_name(level) << ", element " << i;
    }
    EXPECT_NEAR(f->dot(bytes.data(), x.data(), n), exact, 1e-6 * magnitude) << simd_level_name(level);
  }
}

inline void put_half(uint8_t* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, 2);
}

}  // namespace vlkv::quant_test
