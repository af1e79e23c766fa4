// Shared helpers of the kv tests: random data, the SIMD levels this CPU has, and a
// plain double-precision softmax attention reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/cpu_features.h"

namespace vlkv::kvtest {

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

// Every SIMD level the CPU supports (always kScalar).
inline std::vector<SimdLevel> simd_levels() {
  std::vector<SimdLevel> out = {SimdLevel::kScalar};
  const CpuFeatures& f = cpu_features();
  if (f.avx2 && f.fma && f.f16c) out.push_back(SimdLevel::kAvx2);
  if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) out.push_back(SimdLevel::kAvx512);
  return out;
}

// Restores the detected SIMD level when a test ends.
struct SimdLevelGuard {
  SimdLevel saved = simd_level();
  ~SimdLevelGuard() { set_simd_level_for_testing(saved); }
};

// One query row attending over keys/values in double precision.
//   q: [d]; keys, vals: [n, d] (row stride d); out: [d]
inline void ref_attention_row(const float* q, const float* keys, const float* vals, int64_t n, int d, double scale,
                              double* out) {
  std::vector<double> s(n);
  double mx = -INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    double acc = 0;
    for (int i = 0; i < d; ++i) acc += static_cast<double>(q[i]) * keys[t * d + i];
    s[t] = acc * scale;
    mx = std::max(mx, s[t]);
  }
  double l = 0;
  for (auto& e : s) l += (e = std::exp(e - mx));
  std::fill(out, out + d, 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i) out[i] += s[t] / l * vals[t * d + i];
}

// max_i |a_i - b_i| / max(max_i |b_i|, floor)
inline double rel_err(const float* a, const double* b, int d, double floor = 1e-3) {
  double err = 0, mag = floor;
  for (int i = 0; i < d; ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    mag = std::max(mag, std::abs(b[i]));
  }
  return err / mag;
}

}  // namespace vlkv::kvtest
