// Prefill GEMM with 8-bit activations: y = w . x for many activation rows, x rounded to Q8_0
// blocks once per call (as decode and llama.cpp's prefill round them) and multiplied with
// integer dot products (quant/q8_0_gemm.h). For Q8_0 and Q4_0 weights (Q4_0 unpacked per
// chunk into Q8_0 blocks of the same values); other formats take matmul()'s exact f32 tiles.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace vlkv {

// Whether gemm_q8 multiplies w: it rounds activations (WeightMatrix::round_activations_q8,
// off under --exact-matmul), its format has a GEMM kernel, and its rows are whole blocks.
bool gemm_q8_applies(const WeightMatrix& w);

// y[t][r] = w[r] . round_q8(x[t]) for t < n_tokens, r < w.n_rows; x [n_tokens, w.n_cols],
// y [n_tokens, w.n_rows]. Per (row, token), in f32: acc = fma(exact int32 block sum, dw * dx,
// acc) over the blocks in order, whatever n_tokens, the tier and the thread count. For Q8_0
// that is the decode dot (dot_q8) bit for bit at every tier above scalar (dot_q8's scalar
// reference sums in double instead); Q4_0's decode dot orders its f32 sums differently
// (within f32 rounding of this). Requires gemm_q8_applies(w).
void gemm_q8(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace vlkv
