// Scale search shared by the K-quant quantizers (Q4_K, Q5_K, Q6_K): a round-to-nearest
// fit of one sub-block with a small grid of candidate scales and a least-squares refit.
// Quality, not bit-identity with llama-quantize, is the goal (bounds in the tests).
#pragma once

#include <cstdint>

namespace vlkv::quant {

// Fits x[i] ~ scale * L[i] - min with L in [0, n_max] and min >= 0 (the Q4_K / Q5_K form).
// Returns scale (>= 0); *min_out gets min. L is written.
float fit_scale_min(const float* x, int n, int n_max, uint8_t* L, float* min_out);

// One Q4_K / Q5_K super-block of 256 weights: each sub-block of 32 fitted by fit_scale_min
// with codes in [0, n_max], 6-bit scales and mins relative to the largest, written as
// d | dmin | scales[12] (pack_scale_min_k4) to head[0..15]; then the codes L[256]
// recomputed against the stored (rounded) scales.
void quantize_scale_min_k(const float* x, int n_max, uint8_t* head, uint8_t* L);

// Fits x[i] ~ scale * L[i] with L in [-n_neg, n_neg - 1] (the Q6_K form); scale may be negative.
float fit_scale_symmetric(const float* x, int n, int n_neg, int8_t* L);

}  // namespace vlkv::quant
