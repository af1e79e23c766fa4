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
  // stays memory-bound. Off: exact dequantization with f32 math. Prefill is always exact.
  bool round_activations_q8 = false;
};

// y[t][r] = sum_c w[r][c] * x[t][c] for t < n_tokens.
// x: [n_tokens, w.n_cols] f32; y: [n_tokens, w.n_rows] f32.
// Exact dequantization, f32 accumulation; SIMD path chosen at run time.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// One product of a fused decode matvec: y[w->n_rows] = w · x.
struct MatvecTarget {
  const WeightMatrix* w;
  float* y;
};

// Decode (one token): every target's matrix times the same x[n_cols] (all targets share
// n_cols), in one parallel loop: one thread wake-up for all, x rounded to 8 bits once.
// Each y equals matmul(*w, x, 1, y) bit for bit.
void matvec_fused(std::span<const MatvecTarget> targets, const float* x, ThreadPool& pool);

// Decode FFN input: out[r] = silu(gate_r · x) * (up_r · x) for r < gate.n_rows, in one
// parallel loop; equals matmul of both then swiglu() bit for bit.
void matvec_swiglu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out,
                   ThreadPool& pool);

// Dequantize row `row` of w into out[w.n_cols] (embedding lookup).
void get_row(const WeightMatrix& w, int64_t row, float* out);

}  // namespace vlkv
