// Prefill GEMM with 8-bit activations: y = w . x for many activation rows, x rounded to Q8_0
// blocks once per call (as decode and llama.cpp's prefill round them) and multiplied with
// integer dot products (quant/q8_0_gemm.h). Today for Q8_0 weights; other formats take the
// exact f32 tiles of matmul().
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace vlkv {

// Whether gemm_q8 multiplies w: it rounds activations (WeightMatrix::round_activations_q8,
// off under --exact-matmul), its format has a GEMM kernel, and its rows are whole blocks.
bool gemm_q8_applies(const WeightMatrix& w);

// y[t][r] = w[r] . round_q8(x[t]) for t < n_tokens, r < w.n_rows; x [n_tokens, w.n_cols],
// y [n_tokens, w.n_rows]. Each y[t][r] equals the decode dot (the format's dot_q8 of row r
// with x[t] rounded) bit for bit at every tier above scalar, whatever n_tokens and the thread
// count; at scalar it takes the same block steps in plain C++ (dot_q8's scalar reference
// sums in double instead). Requires gemm_q8_applies(w).
void gemm_q8(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace vlkv
