// Matrix multiply of a GGUF weight matrix with f32 activations, threaded.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Dequantize row `row` of w into out[w.n_cols] (embedding lookup).
void get_row(const WeightMatrix& w, int64_t row, float* out);

}  // namespace vlkv
