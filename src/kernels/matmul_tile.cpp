// The scalar f32 micro-kernels for prefill matmul and the tier table (x86 kernels in
// matmul_tile_x86.cpp, ARM ones in matmul_tile_arm.cpp).
#include "kernels/matmul_tile.h"

#include "base/simd_dispatch.h"

namespace vlkv {
namespace {

// Scalar reference: 8 independent partial sums per (row, token) so the compiler can
// keep them in vector registers without reassociating.
template <int R, int T>
void tile_scalar(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k, float* y,
                 int64_t ldy) {
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      const float* wr = w + r * ldw;
      const float* xt = x + t * ldx;
      float lanes[8] = {};
      int64_t i = 0;
      for (; i + 8 <= k; i += 8)
        for (int l = 0; l < 8; ++l) lanes[l] += wr[i + l] * xt[i + l];
      float sum = 0.0f;
      for (; i < k; ++i) sum += wr[i] * xt[i];
      for (int l = 0; l < 8; ++l) sum += lanes[l];
      y[t * ldy + r] += sum;
    }
  }
}

template <int R, int T> struct ScalarK { static constexpr TileFn fn = &tile_scalar<R, T>; };

constexpr int kScalarRows = 2, kScalarTokens = 2;

}  // namespace

const TileKernels& tile_kernels() {
  static const TileKernels scalar = make_tile_table<kScalarRows, kScalarTokens, ScalarK>();
  static const SimdTable<TileKernels> table({.scalar = &scalar,
                                             .avx2 = VLKV_X86(&kTileKernelsAvx2),
                                             .avx512 = VLKV_X86(&kTileKernelsAvx512),
                                             .neon = VLKV_ARM(&kTileKernelsNeon)});
  return table.get();
}

}  // namespace vlkv
