// Register-blocked f32 micro-kernels for prefill matmul: a tile of up to
// max_rows weight rows times max_tokens activation rows, one kernel per SIMD level.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"

namespace vlkv {

// y[t * ldy + r] += sum_{i<k} w[r * ldw + i] * x[t * ldx + i]
// for r < n_rows, t < n_tokens (the kernel's compile-time tile shape). f32 accumulation.
using TileFn = void (*)(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k,
                        float* y, int64_t ldy);

struct TileKernels {
  int max_rows;
  int max_tokens;
  TileFn fns[8][8];  // [n_rows - 1][n_tokens - 1], filled up to max_rows x max_tokens

  TileFn get(int n_rows, int n_tokens) const { return fns[n_rows - 1][n_tokens - 1]; }
};

// The kernels for a level (scalar, AVX2+FMA, AVX-512F). Static storage; thread-safe.
const TileKernels& tile_kernels(SimdLevel level);

}  // namespace vlkv
