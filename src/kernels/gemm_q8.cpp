// The prefill GEMM's blocking and threads. Activation rows are rounded and packed into
// panels of 16 (one vector of lanes) once per call, in parallel. Threads take tasks of
// kTaskRows weight rows; a task walks K in chunks of kChunkBlocks blocks (the weight rows'
// chunk, ~70 KB, stays in L2 while every panel's chunk streams past it) and, per chunk,
// computes its rows' block terms (bias, f32 scale) once for all panels. Per-(row, token)
// f32 accumulators live in the task's buffer between chunks, so K-blocking keeps the block
// order of one unbroken dot. Q8_0 rows are read in place; Q4_0 rows are unpacked per chunk
// into Q8_0 blocks (codes q - 8, the same scale: exactly the same weights); the other block
// formats (Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) per chunk into int8 codes per 32 weights with
// f32 scales and offsets (quant/gemm_unpack.h). One micro-kernel family serves them all.
#include "kernels/gemm_q8.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "quant/gemm_unpack.h"
#include "quant/k_packed.h"
#include "quant/q8_0_gemm.h"
#include "quant/q8_activations.h"

namespace vlkv {
namespace {

using quant::GemmPanel;
using quant::GemmUnpackFormat;
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
static_assert(kChunkBlocks % 8 == 0, "a K chunk holds whole 256-weight K-quant blocks");

// Activation rows packed as q8_0_gemm.h panels: codes [n_panels][n_blocks][8][16],
// d and xsum_d [n_panels][n_blocks][16]. Owned by the calling thread, read by the pool's tasks.
struct Panels {
  int64_t n_panels = 0, n_blocks = 0;
  std::vector<uint32_t> codes;
  std::vector<float> d, xsum_d;
  GemmPanel at(int64_t p, int64_t b) const {
    const int64_t i = (p * n_blocks + b) * kGemmPanelRows;
    return {codes.data() + 8 * i, d.data() + i, xsum_d.data() + i};
  }
};

void pack_panels(const float* x, int64_t n_tokens, int64_t n_cols, Panels& out, ThreadPool& pool) {
  out.n_panels = (n_tokens + kGemmPanelRows - 1) / kGemmPanelRows;
  out.n_blocks = n_cols / kQk;
  const size_t n_codes = static_cast<size_t>(out.n_panels * out.n_blocks * 8 * kGemmPanelRows);
  if (out.codes.size() < n_codes) out.codes.resize(n_codes);
  if (out.d.size() < n_codes / 8) out.d.resize(n_codes / 8);
  if (out.xsum_d.size() < n_codes / 8) out.xsum_d.resize(n_codes / 8);
  pool.parallel_for_chunked(out.n_panels, 1, [&](int64_t p0, int64_t p1, int) {
    thread_local Q8Activations xq;
    for (int64_t p = p0; p < p1; ++p) {
      uint32_t* codes = out.codes.data() + p * out.n_blocks * 8 * kGemmPanelRows;
      float* d = out.d.data() + p * out.n_blocks * kGemmPanelRows;
      float* xsum_d = out.xsum_d.data() + p * out.n_blocks * kGemmPanelRows;
      for (int l = 0; l < kGemmPanelRows; ++l) {
        const int64_t t = p * kGemmPanelRows + l;
        if (t >= n_tokens) {  // a padding row: x = 0 (code 128), scale 0
          for (int64_t k = 0; k < out.n_blocks * 8; ++k) codes[k * kGemmPanelRows + l] = 0x80808080u;
          for (int64_t b = 0; b < out.n_blocks; ++b) d[b * kGemmPanelRows + l] = xsum_d[b * kGemmPanelRows + l] = 0.0f;
          continue;
        }
        quantize_activations_q8(x + t * n_cols, n_cols, xq);
        for (int64_t k = 0; k < out.n_blocks * 8; ++k) {  // dword k of the row -> lane l of vector k
          uint32_t v;
          std::memcpy(&v, xq.q.data() + 4 * k, 4);
          codes[k * kGemmPanelRows + l] = v ^ 0x80808080u;
        }
        for (int64_t b = 0; b < out.n_blocks; ++b) {
          const auto bs = static_cast<size_t>(b);
          d[b * kGemmPanelRows + l] = xq.d[bs];
          xsum_d[b * kGemmPanelRows + l] = xq.xsum_d[bs];
        }
      }
    }
  });
}

// Rows [r0, r1) of w times every panel: y[t][r] for t < n_tokens.
void gemm_task(const WeightMatrix& w, const Panels& xs, int64_t n_tokens, int64_t r0, int64_t r1, float* y) {
  const quant::Q8_0GemmKernels& kern = quant::q8_0_gemm_kernels();
  const GemmUnpackFormat* uf = quant::find_gemm_unpack(w.type);  // nullptr: Q8_0 blocks (Q4_0 converted)
  const int groups = uf && uf->split ? 2 : 1;
  const int64_t nr = r1 - r0;
  thread_local std::vector<float> acc;      // [n_panels][kTaskRows][16]
  thread_local std::vector<int32_t> bias;   // [kTaskRows][kChunkBlocks * groups]
  thread_local std::vector<float> dw;       // [kTaskRows][kChunkBlocks * groups]
  thread_local std::vector<float> offset;   // [kTaskRows][kChunkBlocks]
  thread_local std::vector<uint8_t> codes;  // Q4_0: [kTaskRows][kChunkBlocks * 34]; uf: [kTaskRows][kChunkBlocks * 32]
  const bool to_q8_0 = w.type == GgmlType::kQ4_0;
  const int64_t src_block = block_bytes_of(w.type);
  const int64_t ld = kChunkBlocks * groups;
  codes.resize(static_cast<size_t>(kTaskRows * kChunkBlocks * kBlockBytes));
  acc.assign(static_cast<size_t>(xs.n_panels * kTaskRows * kGemmPanelRows), 0.0f);
  bias.resize(static_cast<size_t>(kTaskRows * ld));
  dw.resize(static_cast<size_t>(kTaskRows * ld));
  if (uf && uf->offset) offset.resize(static_cast<size_t>(kTaskRows * kChunkBlocks));
  for (int64_t c0 = 0; c0 < xs.n_blocks; c0 += kChunkBlocks) {
    const int64_t nbc = std::min(kChunkBlocks, xs.n_blocks - c0);
    GemmWeightRows rows;
    rows.split = groups == 2;
    rows.ld = ld;
    if (uf) {  // unpacked: rows kChunkBlocks * 32 codes apart
      const int64_t per = uf->block_elems / kQk;  // 32-weight blocks per format block (c0, nbc are multiples)
      const uint8_t* src = w.data + r0 * w.row_bytes + c0 / per * static_cast<int64_t>(uf->block_bytes);
      thread_local std::vector<uint8_t> row;  // packed rows: the chunk of one row in the GGUF layout
      if (w.packed_rows8) row.resize(static_cast<size_t>(nbc / per) * uf->block_bytes);
      for (int64_t i = 0; i < nr; ++i) {
        const uint8_t* blocks = src + i * w.row_bytes;
        if (w.packed_rows8) {
          quant::unpack_row8(w.type, w.data, w.row_bytes, r0 + i, c0 / per, nbc / per, row.data());
          blocks = row.data();
        }
        uf->unpack(blocks, nbc / per, reinterpret_cast<int8_t*>(codes.data() + i * kChunkBlocks * kQk),
                   dw.data() + i * ld, bias.data() + i * ld, uf->offset ? offset.data() + i * kChunkBlocks : nullptr);
      }
      rows.w = codes.data();
      rows.row_bytes = kChunkBlocks * kQk;
      rows.block_stride = kQk;
      rows.code_offset = 0;
      rows.codes_0_63 = uf->codes_0_63;
      if (uf->offset) {
        rows.offset = offset.data();
        rows.ld_offset = kChunkBlocks;
      }
    } else {  // Q8_0 blocks: in place, or Q4_0 converted into codes (rows kChunkBlocks blocks apart)
      const uint8_t* chunk = w.data + r0 * w.row_bytes + c0 * src_block;
      int64_t chunk_row_bytes = static_cast<int64_t>(w.row_bytes);
      if (to_q8_0) {
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t b = 0; b < nbc; ++b)
            q4_0_to_q8_0(chunk + i * w.row_bytes + b * kQ4BlockBytes, codes.data() + (i * kChunkBlocks + b) * kBlockBytes);
        chunk = codes.data();
        chunk_row_bytes = kChunkBlocks * kBlockBytes;
      }
      kern.block_terms(chunk, chunk_row_bytes, static_cast<int>(nr), nbc, bias.data(), dw.data(), kChunkBlocks);
      rows.w = chunk;
      rows.row_bytes = chunk_row_bytes;
    }
    const uint8_t* chunk_w = rows.w;
    for (int64_t i0 = 0; i0 < nr; i0 += kGemmMaxWeightRows) {
      rows.w = chunk_w + i0 * rows.row_bytes;
      rows.n_rows = static_cast<int>(std::min<int64_t>(kGemmMaxWeightRows, nr - i0));
      rows.bias = bias.data() + i0 * ld;
      rows.dw = dw.data() + i0 * ld;
      if (rows.offset) rows.offset = offset.data() + i0 * kChunkBlocks;
      for (int64_t p = 0; p < xs.n_panels; ++p)
        kern.tile(rows, xs.at(p, c0), nbc, acc.data() + (p * kTaskRows + i0) * kGemmPanelRows);
    }
  }
  // 16x16 blocks: the block's 16 acc lines stay in L1 while each token's 16 outputs are
  // written contiguously (a column walk down y at n_rows apart thrashes L1's sets)
  for (int64_t p = 0; p < xs.n_panels; ++p) {
    const int64_t nt = std::min<int64_t>(kGemmPanelRows, n_tokens - p * kGemmPanelRows);
    float* yp = y + p * kGemmPanelRows * w.n_rows + r0;
    for (int64_t i0 = 0; i0 < nr; i0 += kGemmPanelRows) {
      const int64_t ni = std::min<int64_t>(kGemmPanelRows, nr - i0);
      const float* a = acc.data() + (p * kTaskRows + i0) * kGemmPanelRows;
      for (int64_t l = 0; l < nt; ++l)
        for (int64_t i = 0; i < ni; ++i) yp[l * w.n_rows + i0 + i] = a[i * kGemmPanelRows + l];
    }
  }
}

}  // namespace

bool gemm_q8_applies(const WeightMatrix& w) {
  if (!w.round_activations_q8 || w.n_cols <= 0) return false;
  if (w.packed_rows8 && !quant::find_gemm_unpack(w.type)) return false;
  int64_t elems = kQk, bytes = block_bytes_of(w.type);
  if (const GemmUnpackFormat* uf = quant::find_gemm_unpack(w.type)) {
    elems = uf->block_elems;
    bytes = static_cast<int64_t>(uf->block_bytes);
  }
  return bytes > 0 && w.n_cols % elems == 0 && w.row_bytes >= static_cast<size_t>(w.n_cols / elems * bytes);
}

void gemm_q8(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  VLKV_CHECK_MSG(gemm_q8_applies(w), "gemm_q8: the matrix does not round activations or its format has no int8 GEMM");
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
