// Random inputs shared by the micro-benchmarks.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace vlkv {

// n standard-normal floats from a fixed seed.
inline std::vector<float> random_normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

}  // namespace vlkv
