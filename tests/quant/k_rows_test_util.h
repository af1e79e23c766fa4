// Inputs shared by the K-quant decode kernel tests (k_strided_test, k_packed_test): rows
// quantized by the reference, and 8-bit activations with a few outliers per block.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "quant/q8_activations.h"
#include "quant/weight_format.h"

namespace vlkv::quant_test {

// Rows of n weights, a third of them off-centre (large minima), quantized by the reference.
inline std::vector<uint8_t> k_rows(const WeightFormat& f, int n_rows, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t rb = f.block_bytes * static_cast<size_t>(n / f.block_elems);
  std::vector<uint8_t> bytes(rb * static_cast<size_t>(n_rows));
  std::vector<float> w(static_cast<size_t>(n));
  for (int r = 0; r < n_rows; ++r) {
    for (auto& v : w) v = nd(rng) + (r % 3 == 0 ? 0.8f : 0.0f);
    f.quantize_row_ref(w.data(), bytes.data() + rb * static_cast<size_t>(r), n);
  }
  return bytes;
}

inline Q8Activations k_activations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng) * (rng() % 8 == 0 ? 20.0f : 1.0f);  // a few outliers per block
  Q8Activations xq;
  quantize_activations_q8(x.data(), n, xq);
  return xq;
}

}  // namespace vlkv::quant_test
