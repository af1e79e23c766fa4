// Register-blocked f32 micro-kernels for prefill matmul: a tile of up to
// max_rows weight rows times max_tokens activation rows, one table per SIMD tier.
#pragma once

#include <cstdint>
#include <utility>

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

// The kernels of the current SIMD tier. Static storage; thread-safe.
const TileKernels& tile_kernels();

// The tier variants (matmul_tile_x86.cpp, matmul_tile_arm.cpp).
extern const TileKernels kTileKernelsAvx2, kTileKernelsAvx512, kTileKernelsNeon;

// Fills fns[r][t] with K<r+1, t+1> for every shape up to RM x TM.
template <int RM, int TM, template <int, int> class K, int... I>
constexpr TileKernels make_tile_table(std::integer_sequence<int, I...>) {
  TileKernels k{RM, TM, {}};
  ((k.fns[I / TM][I % TM] = K<I / TM + 1, I % TM + 1>::fn), ...);
  return k;
}

template <int RM, int TM, template <int, int> class K>
constexpr TileKernels make_tile_table() {
  return make_tile_table<RM, TM, K>(std::make_integer_sequence<int, RM * TM>());
}

}  // namespace vlkv
