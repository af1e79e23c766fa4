// Matrix multiply of a GGUF weight matrix with f32 activations, threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "gguf/gguf_types.h"

namespace vlkv {

// A weight matrix as stored in GGUF: n_rows rows of n_cols elements each (ggml
// dims {n_cols, n_rows}), rows row_bytes apart. Non-owning view into the mmap.
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t row_bytes = 0;
  // Decode (one token) rounds x to 8-bit blocks and uses the format's integer dot, as
  // llama.cpp's CPU matmul does: several times less compute per weight byte, so decode
  // stays memory-bound. Prefill (many tokens) rounds them too where the format has an
  // int8 GEMM (kernels/gemm_q8.h: the quantized block formats), as llama.cpp's prefill does. Off (--exact-matmul):
  // exact dequantization with f32 math.
  bool round_activations_q8 = false;
  // Rows repacked 8 at a time (quant/k_packed.h; K-quants that round activations, n_rows % 8 ==
  // 0): decode reads them through the packed kernel, prefill unpacks them per chunk; data then
  // points at the packed copy, whose owner outlives this view.
  bool packed_rows8 = false;
};

// y[t][r] = sum_c w[r][c] * x[t][c] for t < n_tokens.
// x: [n_tokens, w.n_cols] f32; y: [n_tokens, w.n_rows] f32.
// Exact dequantization, f32 accumulation, unless w rounds activations and its format has an
// int8 GEMM (gemm_q8_applies): then gemm_q8's 8-bit rounding. SIMD path chosen at run time.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// One product of a fused decode matvec: y = w · x, y [n_x, w->n_rows].
struct MatvecTarget {
  const WeightMatrix* w;
  float* y;
};

// Decode rows of a batched step (one token of each of n_x sequences): y[t] = w · x[t] for
// t < n_x, x [n_x, w.n_cols], y [n_x, w.n_rows]. Every weight row is streamed from memory
// once and multiplied with all n_x rows while it sits in L1 (each x[t] rounded to 8 bits
// once when w rounds activations), so a step of n_x sequences reads the weights once.
// Row t equals matmul(w, x[t], 1, y[t]) bit for bit.
void matmul_decode(const WeightMatrix& w, const float* x, int64_t n_x, float* y, ThreadPool& pool);

// A step's activation rows in two blocks: the first n_decode rows are single-token rows
// (matmul_decode), the next n_prompt rows prompt chunks (matmul: the int8 GEMM or exact f32 tiles; a
// block of one row is a decode row too, as matmul does). y [n_decode + n_prompt, w.n_rows].
void matmul_step(const WeightMatrix& w, const float* x, int64_t n_decode, int64_t n_prompt, float* y,
                 ThreadPool& pool);

// Decode: every target's matrix times the same rows x[n_x][n_cols] (all targets share
// n_cols), in one parallel loop: one thread wake-up for all, x rounded to 8 bits once.
// Each target's y[t] equals matmul(*w, x[t], 1, y[t]) bit for bit.
void matvec_fused(std::span<const MatvecTarget> targets, const float* x, ThreadPool& pool, int64_t n_x = 1);

// Decode FFN input: out[t][r] = silu(gate_r · x[t]) * (up_r · x[t]) for r < gate.n_rows,
// t < n_x (out [n_x, gate.n_rows]), in one parallel loop; equals matmul of both then
// swiglu() bit for bit.
void matvec_swiglu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out,
                   ThreadPool& pool, int64_t n_x = 1);

// Dequantize row `row` of w into out[w.n_cols] (embedding lookup).
void get_row(const WeightMatrix& w, int64_t row, float* out);

}  // namespace vlkv
