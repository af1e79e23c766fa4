// The prefill GEMM's blocking and threads. Activation rows are rounded and packed into
// panels of 16 (one vector of lanes) once per call, in parallel. Threads take tasks of
// kTaskRows weight rows; a task walks K in chunks of kChunkBlocks blocks (the weight rows'
// chunk, ~70 KB, stays in L2 while every panel's chunk streams past it) and, per chunk,
// computes its rows' block terms (bias, f32 scale) once for all panels. Per-(row, token)
// f32 accumulators live in the task's buffer between chunks, so K-blocking keeps the block
// order of one unbroken dot. Q4_0 rows are unpacked per chunk into Q8_0 blocks (codes q - 8,
// the same scale: exactly the same weights), so one micro-kernel serves both formats.
#include "kernels/gemm_q8.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "quant/q8_0_gemm.h"
#include "quant/q8_activations.h"

namespace vlkv {
namespace {

using quant::GemmWeightRows;
using quant::kGemmMaxWeightRows;
using quant::kGemmPanelRows;

constexpr int64_t kQk = 32;           // Q8_0 block: f16 scale, 32 codes
constexpr int64_t kBlockBytes = 34;
constexpr int64_t kQ4BlockBytes = 18;  // Q4_0 block: f16 scale, 16 bytes of 4-bit codes q (w = (q - 8) * d)

// Bytes per block of the formats the GEMM takes; 0 for the others.
int64_t block_bytes_of(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0: return kBlockBytes;
    case GgmlType::kQ4_0: return kQ4BlockBytes;
    default: return 0;
  }
}

// One Q4_0 block as the Q8_0 block of the same weights: weight j is the low nibble of byte
// j, weight j + 16 its high nibble.
void q4_0_to_q8_0(const uint8_t* src, uint8_t* dst) {
  std::memcpy(dst, src, 2);
  for (int j = 0; j < 16; ++j) {
    dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>((src[2 + j] & 0x0F) - 8));
    dst[2 + 16 + j] = static_cast<uint8_t>(static_cast<int8_t>((src[2 + j] >> 4) - 8));
  }
}
constexpr int64_t kTaskRows = 64;     // weight rows per task (a multiple of kGemmMaxWeightRows)
constexpr int64_t kChunkBlocks = 32;  // K chunk: 1024 columns

// Activation rows packed as q8_0_gemm.h panels: codes [n_panels][n_blocks][8][16],
// d [n_panels][n_blocks][16]. Owned by the calling thread, read by the pool's tasks.
struct Panels {
  int64_t n_panels = 0, n_blocks = 0;
  std::vector<uint32_t> codes;
  std::vector<float> d;
  const uint32_t* codes_at(int64_t p, int64_t b) const { return codes.data() + (p * n_blocks + b) * 8 * kGemmPanelRows; }
  const float* d_at(int64_t p, int64_t b) const { return d.data() + (p * n_blocks + b) * kGemmPanelRows; }
};

void pack_panels(const float* x, int64_t n_tokens, int64_t n_cols, Panels& out, ThreadPool& pool) {
  out.n_panels = (n_tokens + kGemmPanelRows - 1) / kGemmPanelRows;
  out.n_blocks = n_cols / kQk;
  const size_t n_codes = static_cast<size_t>(out.n_panels * out.n_blocks * 8 * kGemmPanelRows);
  if (out.codes.size() < n_codes) out.codes.resize(n_codes);
  if (out.d.size() < n_codes / 8) out.d.resize(n_codes / 8);
  pool.parallel_for_chunked(out.n_panels, 1, [&](int64_t p0, int64_t p1, int) {
    thread_local Q8Activations xq;
    for (int64_t p = p0; p < p1; ++p) {
      uint32_t* codes = out.codes.data() + p * out.n_blocks * 8 * kGemmPanelRows;
      float* d = out.d.data() + p * out.n_blocks * kGemmPanelRows;
      for (int l = 0; l < kGemmPanelRows; ++l) {
        const int64_t t = p * kGemmPanelRows + l;
        if (t >= n_tokens) {  // a padding row: x = 0 (code 128), scale 0
          for (int64_t k = 0; k < out.n_blocks * 8; ++k) codes[k * kGemmPanelRows + l] = 0x80808080u;
          for (int64_t b = 0; b < out.n_blocks; ++b) d[b * kGemmPanelRows + l] = 0.0f;
          continue;
        }
        quantize_activations_q8(x + t * n_cols, n_cols, xq);
        for (int64_t k = 0; k < out.n_blocks * 8; ++k) {  // dword k of the row -> lane l of vector k
          uint32_t v;
          std::memcpy(&v, xq.q.data() + 4 * k, 4);
          codes[k * kGemmPanelRows + l] = v ^ 0x80808080u;
        }
        for (int64_t b = 0; b < out.n_blocks; ++b) d[b * kGemmPanelRows + l] = xq.d[static_cast<size_t>(b)];
      }
    }
  });
}

// Rows [r0, r1) of w times every panel: y[t][r] for t < n_tokens.
void gemm_task(const WeightMatrix& w, const Panels& xs, int64_t n_tokens, int64_t r0, int64_t r1, float* y) {
  const quant::Q8_0GemmKernels& kern = quant::q8_0_gemm_kernels();
  const int64_t nr = r1 - r0;
  thread_local std::vector<float> acc;     // [n_panels][kTaskRows][16]
  thread_local std::vector<int32_t> bias;  // [kTaskRows][kChunkBlocks]
  thread_local std::vector<float> dw;      // [kTaskRows][kChunkBlocks]
  thread_local std::vector<uint8_t> q8;    // [kTaskRows][kChunkBlocks * 34]: Q4_0 rows unpacked
  const bool unpack = w.type == GgmlType::kQ4_0;
  const int64_t src_block = block_bytes_of(w.type);
  if (unpack) q8.resize(static_cast<size_t>(kTaskRows * kChunkBlocks * kBlockBytes));
  acc.assign(static_cast<size_t>(xs.n_panels * kTaskRows * kGemmPanelRows), 0.0f);
  bias.resize(static_cast<size_t>(kTaskRows * kChunkBlocks));
  dw.resize(static_cast<size_t>(kTaskRows * kChunkBlocks));
  for (int64_t c0 = 0; c0 < xs.n_blocks; c0 += kChunkBlocks) {
    const int64_t nbc = std::min(kChunkBlocks, xs.n_blocks - c0);
    // The chunk's rows as Q8_0 blocks: in place, or unpacked into q8 (rows kChunkBlocks blocks apart).
    const uint8_t* chunk = w.data + r0 * w.row_bytes + c0 * src_block;
    int64_t chunk_row_bytes = static_cast<int64_t>(w.row_bytes);
    if (unpack) {
      for (int64_t i = 0; i < nr; ++i)
        for (int64_t b = 0; b < nbc; ++b)
          q4_0_to_q8_0(chunk + i * w.row_bytes + b * kQ4BlockBytes, q8.data() + (i * kChunkBlocks + b) * kBlockBytes);
      chunk = q8.data();
      chunk_row_bytes = kChunkBlocks * kBlockBytes;
    }
    kern.block_terms(chunk, chunk_row_bytes, static_cast<int>(nr), nbc, bias.data(), dw.data(), kChunkBlocks);
    for (int64_t i0 = 0; i0 < nr; i0 += kGemmMaxWeightRows) {
      GemmWeightRows rows;
      rows.w = chunk + i0 * chunk_row_bytes;
      rows.row_bytes = chunk_row_bytes;
      rows.n_rows = static_cast<int>(std::min<int64_t>(kGemmMaxWeightRows, nr - i0));
      rows.bias = bias.data() + i0 * kChunkBlocks;
      rows.dw = dw.data() + i0 * kChunkBlocks;
      rows.ld = kChunkBlocks;
      for (int64_t p = 0; p < xs.n_panels; ++p)
        kern.tile(rows, xs.codes_at(p, c0), xs.d_at(p, c0), nbc, acc.data() + (p * kTaskRows + i0) * kGemmPanelRows);
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* a = acc.data() + (t / kGemmPanelRows) * kTaskRows * kGemmPanelRows + t % kGemmPanelRows;
    for (int64_t i = 0; i < nr; ++i) y[t * w.n_rows + r0 + i] = a[i * kGemmPanelRows];
  }
}

}  // namespace

bool gemm_q8_applies(const WeightMatrix& w) {
  const int64_t bb = block_bytes_of(w.type);
  return w.round_activations_q8 && bb > 0 && w.n_cols > 0 && w.n_cols % kQk == 0 &&
         w.row_bytes >= static_cast<size_t>(w.n_cols / kQk * bb);
}

void gemm_q8(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  VLKV_CHECK_MSG(gemm_q8_applies(w), "gemm_q8: the matrix does not round activations or is not Q8_0 / Q4_0");
  if (n_tokens <= 0 || w.n_rows <= 0) return;
  thread_local Panels caller_panels;
  const Panels& xs = caller_panels;  // a reference: inside a task the name would mean the worker's own
  pack_panels(x, n_tokens, w.n_cols, caller_panels, pool);
  const int64_t n_tasks = (w.n_rows + kTaskRows - 1) / kTaskRows;
  pool.parallel_for_chunked(n_tasks, 1, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b)
      gemm_task(w, xs, n_tokens, b * kTaskRows, std::min(w.n_rows, (b + 1) * kTaskRows), y);
  });
}

}  // namespace vlkv
