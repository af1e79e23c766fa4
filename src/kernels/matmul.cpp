// matmul over any weight format in the quant table. Decode (one token) streams
// each weight row once through the format's fused dot; prefill of a matrix that rounds
// activations takes the int8 GEMM (kernels/gemm_q8.h) where its format has one, else the
// exact f32 GEMM (kernels/gemm_f32.h: weight panels dequantized once, register-blocked tiles).
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/gemm_q8.h"
#include "kernels/gemm_f32.h"
#include "kernels/ops.h"
#include "quant/k_packed.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

const WeightFormat& format_of(const WeightMatrix& w) {
  const WeightFormat* fmt = find_weight_format(w.type);
  VLKV_CHECK_MSG(fmt != nullptr, ggml_type_name(w.type));
  VLKV_CHECK(w.n_cols % fmt->block_elems == 0);
  return *fmt;
}

bool uses_q8(const WeightMatrix& w, const WeightFormat& fmt) {
  return w.round_activations_q8 && fmt.dot_q8 != nullptr && w.n_cols % 32 == 0;
}

// One row's dot product: the 8-bit path when the matrix rounds activations, else f32.
inline float row_dot(const WeightMatrix& w, const WeightFormat& fmt, bool q8, int64_t r, const float* x,
                     const Q8Activations& xq) {
  const uint8_t* row = w.data + r * w.row_bytes;
  return q8 ? fmt.dot_q8(row, xq, w.n_cols) : fmt.dot(row, x, w.n_cols);
}

// A decode loop over n_rows rows of n_cols (multiply-adds per row), in guided chunks
// (ThreadPool::parallel_for_guided): the first a quarter of a thread's share, so a thread that
// is preempted (shared machines) leaves little to wait for, then shrinking to ~1M multiply-adds
// (~0.5 MiB of Q4_K rows), so the threads finish together. Equal n / (4 threads) chunks left
// one thread idle for up to a chunk at every loop's end (12% of decode samples in pool waits,
// 10% guided). Chunks are whole groups of packed rows (quant/k_packed.h), so a group is one
// chunk's.
void matvec_loop(ThreadPool& pool, int64_t n_rows, int64_t n_cols, const ThreadPool::Task& fn) {
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 20) / n_cols);
  pool.parallel_for_guided(n_rows, min_rows, quant::kPackRows, fn);
}

// The decode rows x [n_x, n_cols] of one loop, each rounded to 8 bits once by the caller's
// thread when any of the loop's matrices uses them (else an empty span: the f32 dots read x),
// and, for the loops through dot_q8_lanes, interleaved in near-equal groups of <= kLaneRows.
struct DecodeRows {
  const float* x;
  int64_t n_x, n_cols;
  std::span<const Q8Activations> q8;
  std::span<const Q8Lanes> groups;
  const float* row(int64_t t) const { return x + t * n_cols; }
  const Q8Activations& rounded(int64_t t) const {
    static const Q8Activations kNone;
    return q8.empty() ? kNone : q8[static_cast<size_t>(t)];
  }
};

// tile: some matrix of the loop multiplies through dot_q8_lanes (its groups are built).
DecodeRows decode_rows(const float* x, int64_t n_x, int64_t n_cols, bool any_q8, bool tile) {
  thread_local std::vector<Q8Activations> xq;  // [n_x], storage reused across steps
  thread_local std::vector<Q8Lanes> lanes;     // [n_groups]
  if (!any_q8) return {x, n_x, n_cols, {}, {}};
  if (xq.size() < static_cast<size_t>(n_x)) xq.resize(static_cast<size_t>(n_x));
  for (int64_t t = 0; t < n_x; ++t) quantize_activations_q8(x + t * n_cols, n_cols, xq[static_cast<size_t>(t)]);
  const int64_t n_groups = tile ? (n_x + kLaneRows - 1) / kLaneRows : 0;
  if (lanes.size() < static_cast<size_t>(n_groups)) lanes.resize(static_cast<size_t>(n_groups));
  for (int64_t gi = 0, t0 = 0; gi < n_groups; ++gi) {
    const int nt = static_cast<int>(n_x / n_groups + (gi < n_x % n_groups ? 1 : 0));
    std::array<const Q8Activations*, kLaneRows> rows;
    for (int t = 0; t < nt; ++t) rows[t] = &xq[static_cast<size_t>(t0 + t)];
    interleave_q8_lanes(rows.data(), nt, lanes[static_cast<size_t>(gi)]);
    t0 += nt;
  }
  return {x, n_x, n_cols, std::span<const Q8Activations>(xq.data(), static_cast<size_t>(n_x)),
          std::span<const Q8Lanes>(lanes.data(), static_cast<size_t>(n_groups))};
}

// Whether a loop of n_x decode rows multiplies this matrix through dot_q8_lanes: from the
// tier's min_lane_rows (FormatKernels) rows on; 0 there means the lane kernels are loops over
// dot_q8, so the loops below call dot_q8 directly. Both take the same per-lane steps, so the
// choice never changes a result.
bool uses_tile(const WeightFormat& fmt, bool q8, int64_t n_x) {
  if (!q8 || !fmt.dot_q8_lanes) return false;
  const int min_rows = fmt.kernels().min_lane_rows;
  return min_rows > 0 && n_x >= min_rows;
}

// Weight rows one pass over the activation groups serves (tile_dots): a group (~35 KB at 2048
// columns) is read from L2 once per block of rows, the rows' blocks from L1 for every group.
constexpr int kTileBlockRows = kMaxLaneWeightRows;

// y_i[t * ldy] = rows[i] . x[t] for n_rows (<= kTileBlockRows) weight rows of one format and
// every decode row t, through dot_q8_lanes, group by group.
void tile_dots(const WeightFormat& fmt, const uint8_t* const* rows, int n_rows, int64_t n_cols, const DecodeRows& xs,
               float* const* y, int64_t ldy) {
  constexpr int kLanes = kLaneRows + 1;
  std::array<float, kMaxLaneWeightRows * kLanes> out;
  int64_t t0 = 0;
  for (const Q8Lanes& g : xs.groups) {
    fmt.dot_q8_lanes(reinterpret_cast<const void* const*>(rows), n_rows, g, n_cols, out.data());
    for (int i = 0; i < n_rows; ++i)
      for (int l = 0; l < g.n_rows; ++l) y[i][(t0 + l) * ldy] = out[i * kLanes + l];
    t0 += g.n_rows;
  }
}

// y[(r - r0) * ldy_r + t * ldy] = w[r] . x[t] for rows [r0, r1) and every decode row t. One decode
// row at a time through dot_q8_strided where the tier has a strided kernel (16 weight rows per
// call, several per pass), else a dot per pair.
void row_dots(const WeightMatrix& w, const WeightFormat& fmt, bool q8, int64_t r0, int64_t r1, const DecodeRows& xs,
              float* y, int64_t ldy_r, int64_t ldy) {
  if (w.packed_rows8) {  // whole groups of 8 packed rows (a group cut by [r0, r1) is computed whole)
    VLKV_CHECK_MSG(q8, "packed weight rows take the 8-bit decode path only");
    constexpr int64_t kG = quant::kPackRows;
    float out[kG];
    for (int64_t g = r0 / kG * kG; g < r1; g += kG) {
      const int64_t b = std::max(g, r0), e = std::min(g + kG, r1);
      for (int64_t t = 0; t < xs.n_x; ++t) {
        quant::dot_q8_packed8(fmt, w.data + g * w.row_bytes, w.row_bytes, xs.rounded(t), w.n_cols, out);
        for (int64_t r = b; r < e; ++r) y[(r - r0) * ldy_r + t * ldy] = out[r - g];
      }
    }
    return;
  }
  if (q8 && fmt.dot_q8_strided && fmt.kernels().dot_q8_strided) {
    constexpr int kChunk = kLaneRows + 1;
    std::array<float, kChunk> out;
    for (int64_t r = r0; r < r1; r += kChunk) {
      const int nr = static_cast<int>(std::min<int64_t>(kChunk, r1 - r));
      for (int64_t t = 0; t < xs.n_x; ++t) {  // the chunk's rows stay in L1 for the other decode rows
        fmt.dot_q8_strided(w.data + r * w.row_bytes, static_cast<int64_t>(w.row_bytes), nr, xs.rounded(t), w.n_cols,
                           out.data());
        for (int i = 0; i < nr; ++i) y[(r - r0 + i) * ldy_r + t * ldy] = out[i];
      }
    }
    return;
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < xs.n_x; ++t) y[(r - r0) * ldy_r + t * ldy] = row_dot(w, fmt, q8, r, xs.row(t), xs.rounded(t));
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (n_tokens <= 0 || w.n_rows <= 0) return;
  if (n_tokens == 1) {
    matmul_decode(w, x, 1, y, pool);
    return;
  }
  if (gemm_q8_applies(w)) {  // rounded activations, integer dots
    gemm_q8(w, x, n_tokens, y, pool);
    return;
  }
  VLKV_CHECK_MSG(!w.packed_rows8, "packed weight rows take the int8 GEMM only");
  gemm_f32(w, x, n_tokens, y, pool);  // exact: panels dequantized once, blocked f32 micro-kernels
}

void matmul_decode(const WeightMatrix& w, const float* x, int64_t n_x, float* y, ThreadPool& pool) {
  if (n_x <= 0 || w.n_rows <= 0) return;
  const MatvecTarget target{&w, y};
  matvec_fused(std::span<const MatvecTarget>(&target, 1), x, pool, n_x);
}

void matmul_step(const WeightMatrix& w, const float* x, int64_t n_decode, int64_t n_prompt, float* y,
                 ThreadPool& pool) {
  matmul_decode(w, x, n_decode, y, pool);
  matmul(w, x + n_decode * w.n_cols, n_prompt, y + n_decode * w.n_rows, pool);
}

void matvec_fused(std::span<const MatvecTarget> targets, const float* x, ThreadPool& pool, int64_t n_x) {
  constexpr size_t kMaxTargets = 4;
  VLKV_CHECK(!targets.empty() && targets.size() <= kMaxTargets);
  if (n_x <= 0) return;
  const int64_t n_cols = targets[0].w->n_cols;
  std::array<const WeightFormat*, kMaxTargets> fmts{};
  std::array<bool, kMaxTargets> q8{}, tile{};
  std::array<int64_t, kMaxTargets + 1> first_row{};  // targets' rows laid end to end
  bool any_q8 = false, any_tile = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    const WeightMatrix& w = *targets[i].w;
    VLKV_CHECK(w.n_cols == n_cols);
    fmts[i] = &format_of(w);
    q8[i] = uses_q8(w, *fmts[i]);
    tile[i] = uses_tile(*fmts[i], q8[i], n_x);
    any_q8 = any_q8 || q8[i];
    any_tile = any_tile || tile[i];
    first_row[i + 1] = first_row[i] + w.n_rows;
  }
  const DecodeRows xs = decode_rows(x, n_x, n_cols, any_q8, any_tile);
  const int64_t n_rows = first_row[targets.size()];
  matvec_loop(pool, n_rows, n_cols * n_x, [&](int64_t r0, int64_t r1, int) {
    for (size_t i = 0; i < targets.size(); ++i) {
      const int64_t b = std::max(r0, first_row[i]), e = std::min(r1, first_row[i + 1]);
      const WeightMatrix& w = *targets[i].w;
      if (tile[i]) {  // rows in blocks of kTileBlockRows
        for (int64_t wr = b - first_row[i]; wr < e - first_row[i]; wr += kTileBlockRows) {
          const int nr = static_cast<int>(std::min<int64_t>(kTileBlockRows, e - first_row[i] - wr));
          std::array<const uint8_t*, kTileBlockRows> rows;
          std::array<float*, kTileBlockRows> ys;
          for (int j = 0; j < nr; ++j) {
            rows[j] = w.data + (wr + j) * w.row_bytes;
            ys[j] = targets[i].y + wr + j;
          }
          tile_dots(*fmts[i], rows.data(), nr, n_cols, xs, ys.data(), w.n_rows);
        }
        continue;
      }
      if (b < e) row_dots(w, *fmts[i], q8[i], b - first_row[i], e - first_row[i], xs, targets[i].y + (b - first_row[i]), 1, w.n_rows);
    }
  });
}

void matvec_swiglu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out,
                   ThreadPool& pool, int64_t n_x) {
  VLKV_CHECK(gate.n_rows == up.n_rows && gate.n_cols == up.n_cols);
  if (n_x <= 0) return;
  const WeightFormat& fg = format_of(gate);
  const WeightFormat& fu = format_of(up);
  const bool q8g = uses_q8(gate, fg), q8u = uses_q8(up, fu);
  // One tile over the gate and up rows of an output (same format, both through dot_q8_lanes).
  const bool tile = &fg == &fu && uses_tile(fg, q8g, n_x) && q8u;
  const DecodeRows xs = decode_rows(x, n_x, gate.n_cols, q8g || q8u, tile);
  const int64_t n_ff = gate.n_rows;
  // Each chunk holds rows of both matrices, so its grain counts two rows per output.
  matvec_loop(pool, n_ff, 2 * gate.n_cols * n_x, [&](int64_t r0, int64_t r1, int) {
    // Tiles: kTileBlockRows / 2 outputs at a time, each its gate and up rows as one pair.
    constexpr int kOutputs = kTileBlockRows / 2;
    thread_local std::vector<float> gu;  // [2 * kOutputs, n_x] gate and up dots of the outputs
    if (tile && gu.size() < static_cast<size_t>(2 * kOutputs * n_x)) gu.resize(static_cast<size_t>(2 * kOutputs * n_x));
    for (int64_t r = r0; r < r1 && tile; r += kOutputs) {
      const int no = static_cast<int>(std::min<int64_t>(kOutputs, r1 - r));
      std::array<const uint8_t*, kTileBlockRows> rows;
      std::array<float*, kTileBlockRows> ys;
      for (int j = 0; j < no; ++j) {
        rows[2 * j] = gate.data + (r + j) * gate.row_bytes;
        rows[2 * j + 1] = up.data + (r + j) * up.row_bytes;
        ys[2 * j] = gu.data() + 2 * j * n_x;
        ys[2 * j + 1] = gu.data() + (2 * j + 1) * n_x;
      }
      tile_dots(fg, rows.data(), 2 * no, gate.n_cols, xs, ys.data(), 1);
      for (int j = 0; j < no; ++j)
        for (int64_t t = 0; t < n_x; ++t) out[t * n_ff + r + j] = swiglu_one(ys[2 * j][t], ys[2 * j + 1][t]);
    }
    if (tile) return;
    // The chunk's gate and up dots, [2][r1 - r0][n_x], then its outputs.
    const int64_t nr = r1 - r0;
    if (gu.size() < static_cast<size_t>(2 * nr * n_x)) gu.resize(static_cast<size_t>(2 * nr * n_x));
    float* g = gu.data();
    float* u = g + nr * n_x;
    row_dots(gate, fg, q8g, r0, r1, xs, g, n_x, 1);
    row_dots(up, fu, q8u, r0, r1, xs, u, n_x, 1);
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t t = 0; t < n_x; ++t) out[t * n_ff + r0 + r] = swiglu_one(g[r * n_x + t], u[r * n_x + t]);
  });
}

void get_row(const WeightMatrix& w, int64_t row, float* out) {
  VLKV_CHECK(row >= 0 && row < w.n_rows);
  const WeightFormat& fmt = format_of(w);
  if (w.packed_rows8) {  // the row back in the GGUF layout first
    thread_local std::vector<uint8_t> bytes;  // [row_bytes]
    bytes.resize(w.row_bytes);
    quant::unpack_row8(w.type, w.data, w.row_bytes, row, 0, w.n_cols / fmt.block_elems, bytes.data());
    fmt.dequantize_row(bytes.data(), out, w.n_cols);
    return;
  }
  fmt.dequantize_row(w.data + row * w.row_bytes, out, w.n_cols);
}

}  // namespace vlkv
