// Prefill GEMM with 8-bit activations: y = w . x for many activation rows, x rounded to Q8_0
// blocks once per call (as decode and llama.cpp's prefill round them) and multiplied with
// integer dot products (quant/q8_0_gemm.h). For Q8_0, Q4_0 (unpacked per chunk into Q8_0
// blocks of the same values), Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K weights (unpacked per chunk
// into int8 codes per 32 weights with f32 scales and offsets, quant/gemm_unpack.h); the other
// formats (F32, F16, BF16) take matmul()'s exact f32 tiles.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace vlkv {

// Whether gemm_q8 multiplies w: it rounds activations (WeightMatrix::round_activations_q8,
// off under --exact-matmul), its format has a GEMM kernel, and its rows are whole blocks.
bool gemm_q8_applies(const WeightMatrix& w);

// y[t][r] = w[r] . round_q8(x[t]) for t < n_tokens, r < w.n_rows; x [n_tokens, w.n_cols],
// y [n_tokens, w.n_rows]. Activations are rounded to Q8_0 blocks of 32 for every format, K-quants
// included (as vlkv's decode dot rounds them; llama.cpp uses Q8_K for K-quants). Per (row,
// token), in f32: the block steps of quant/q8_0_gemm.h over the 32-weight blocks in order,
// whatever n_tokens, the tier and the thread count. For Q8_0 that is the decode dot (dot_q8)
// bit for bit at every tier above scalar (dot_q8's scalar reference sums in double instead);
// the other formats' decode dots add the same exact integer block sums times the same scale
// products in another f32 order (within f32 rounding of this). Requires gemm_q8_applies(w).
void gemm_q8(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace vlkv
