// matmul over any weight format in the quant table. Decode (one token) streams
// each weight row once through the format's fused dot; prefill dequantizes a
// block of rows once into a thread-local f32 tile and multiplies it with every
// token using a register-blocked f32 micro-kernel (rows x tokens dot products).
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/cpu_features.h"
#include "kernels/matmul_tile.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

constexpr int64_t kRowBlock = 16;     // weight rows dequantized together (one task)
constexpr int64_t kColChunk = 2048;   // columns per tile: a multiple of every block size
constexpr int64_t kTileStride = kColChunk + 16;  // padded so rows do not alias in cache sets

const WeightFormat& format_of(const WeightMatrix& w) {
  const WeightFormat* fmt = find_weight_format(w.type);
  VLKV_CHECK_MSG(fmt != nullptr, ggml_type_name(w.type));
  VLKV_CHECK(w.n_cols % fmt->block_elems == 0);
  return *fmt;
}

// Decode: one fused dot per row, rows split across threads.
void matvec(const WeightMatrix& w, const WeightFormat& fmt, const float* x, float* y,
            ThreadPool& pool) {
  // A thread is worth waking for ~32K weights or more.
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 15) / w.n_cols);
  if (w.round_activations_q8 && fmt.dot_q8 && w.n_cols % 32 == 0) {
    thread_local Q8Activations xq;  // the caller's thread rounds x once for all rows
    quantize_activations_q8(x, w.n_cols, xq);
    const Q8Activations& xr = xq;
    pool.parallel_for(w.n_rows, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) y[r] = fmt.dot_q8(w.data + r * w.row_bytes, xr, w.n_cols);
    }, min_rows);
    return;
  }
  pool.parallel_for(w.n_rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) y[r] = fmt.dot(w.data + r * w.row_bytes, x, w.n_cols);
  }, min_rows);
}

// Prefill: for rows [r0, r1) (at most kRowBlock) and every token, y[t][r] = w[r] . x[t].
void matmul_row_block(const WeightMatrix& w, const WeightFormat& fmt, const float* x,
                      int64_t n_tokens, float* y, int64_t r0, int64_t r1, const TileKernels& kern,
                      std::vector<float>& tile) {
  const int64_t nr = r1 - r0;
  for (int64_t t = 0; t < n_tokens; ++t) std::fill_n(y + t * w.n_rows + r0, nr, 0.0f);
  const size_t block_bytes = fmt.block_bytes;
  for (int64_t k0 = 0; k0 < w.n_cols; k0 += kColChunk) {
    const int64_t kn = std::min(kColChunk, w.n_cols - k0);
    // The weight tile [nr, kn], rows kTileStride apart. f32 rows are copied too (cheap next
    // to n_tokens dots), so rows with a power-of-two row_bytes do not alias in cache sets.
    const size_t byte_offset = static_cast<size_t>(k0 / fmt.block_elems) * block_bytes;
    for (int64_t r = 0; r < nr; ++r)
      fmt.dequantize_row(w.data + (r0 + r) * w.row_bytes + byte_offset,
                         tile.data() + r * kTileStride, kn);
    const float* wt = tile.data();
    const int64_t ldw = kTileStride;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kern.max_tokens) {
      const int nt = static_cast<int>(std::min<int64_t>(kern.max_tokens, n_tokens - t0));
      for (int64_t rr = 0; rr < nr; rr += kern.max_rows) {
        const int nrr = static_cast<int>(std::min<int64_t>(kern.max_rows, nr - rr));
        kern.get(nrr, nt)(wt + rr * ldw, ldw, x + t0 * w.n_cols + k0, w.n_cols, kn,
                          y + t0 * w.n_rows + r0 + rr, w.n_rows);
      }
    }
  }
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (n_tokens <= 0 || w.n_rows <= 0) return;
  const WeightFormat& fmt = format_of(w);
  if (n_tokens == 1) {
    matvec(w, fmt, x, y, pool);
    return;
  }
  const TileKernels& kern = tile_kernels(simd_level());
  const int64_t n_blocks = (w.n_rows + kRowBlock - 1) / kRowBlock;
  pool.parallel_for(n_blocks, [&](int64_t b0, int64_t b1, int) {
    thread_local std::vector<float> tile;
    if (tile.size() < static_cast<size_t>(kRowBlock * kTileStride)) tile.resize(kRowBlock * kTileStride);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kRowBlock;
      const int64_t r1 = std::min(w.n_rows, r0 + kRowBlock);
      matmul_row_block(w, fmt, x, n_tokens, y, r0, r1, kern, tile);
    }
  });
}

void get_row(const WeightMatrix& w, int64_t row, float* out) {
  VLKV_CHECK(row >= 0 && row < w.n_rows);
  const WeightFormat& fmt = format_of(w);
  fmt.dequantize_row(w.data + row * w.row_bytes, out, w.n_cols);
}

}  // namespace vlkv
