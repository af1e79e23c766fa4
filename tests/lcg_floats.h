// Uniform floats in [lo, hi) from a 32-bit LCG: exact float operations on 24-bit integers, the
// same on every architecture (no <random> distribution: libstdc++'s goes through long double,
// 80-bit on x86, 128-bit on ARM64). For the tests that compare bits across architectures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vlkv::testing_lcg {

inline std::vector<float> lcg_floats(size_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> x(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& e : x) {
    s = s * 1664525u + 1013904223u;
    e = lo + (hi - lo) * (static_cast<float>(s >> 8) * 0x1p-24f);
  }
  return x;
}

}  // namespace vlkv::testing_lcg
