// Prefill attention's GEMM path (internal to attention.cpp): a tile of query rows against a
// chunk of f16 or f32 keys as two small GEMMs on the exact f32 GEMM's micro-kernels
// (kernels/gemm_f32.h), FlashAttention style. The chunk is widened to f32 once per tile and
// packed into the micro-kernel's panels, so each key and value is read once per tile of up to
// kGemmTileRows rows instead of once per 4 rows (the fused codec kernels), and the scores and
// P.V run at the GEMM's register-blocked rate. Each logit and each output element is one f32
// multiply-add chain in key / channel order, whatever the tile's rows. Compressed codecs keep
// their fused kernels, which read the codes in place with integer dot products: decoding their
// chunks to f32 per tile measured 4x slower (prefill_chunk_bench, int4 and kivi2 at 16K).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/attention_chunks.h"

namespace vlkv::attn {

// Query rows per tile on this path: the decode and packing of a chunk are paid once for them.
constexpr int kGemmTileRows = 256;
// Steps with at least this many new tokens take the GEMM path (prefill); decode steps keep
// the fused codec kernels (which read compressed codes in place and never decode a chunk).
constexpr int kGemmMinTokens = 16;

// Per-thread buffers of the path.
struct GemmScratch {
  std::vector<float> krows, vrows;  // [n, head_dim] the chunk decoded
  std::vector<float> kp;    // [ceil(n / nr)][head_dim][nr] keys, nr at a time, channel-major
  std::vector<float> vp;    // [head_dim / nr][n][nr] values in nr-channel column groups
  std::vector<float> logits;  // gemm_chunk_scores' padded scores
};

// Whether the path runs heads of head_dim d at the current SIMD tier (d a multiple of the
// micro-kernel's width, so output rows need no padding).
bool gemm_path_fits(int d);
// Whether the path reads chunk c: both its codecs store plain f16 or f32 rows.
bool gemm_reads(const Chunk& c);
// The logits row stride the path needs for a chunk of n keys (n rounded up to the kernel width).
int64_t gemm_logits_ld(int64_t n);

// Widens the chunk (gemm_reads(c)) and packs its keys and values into s; keep non-null ([chunk tokens],
// 1 = kept): only the kept tokens, in order (sparse attention reads no other), and granules
// without a kept token are not read. Returns the number of packed tokens.
int64_t gemm_pack(const Chunk& c, const uint8_t* keep, int d, GemmScratch& s, bool values = true);
// logits[r * ld + t] = scale * (q[r] . k_t) for the n packed keys (columns [n, ld) are written
// with padding).  q: [rows, head_dim].
void gemm_scores(const GemmScratch& s, int64_t n, const float* q, int rows, int d, float scale, float* logits,
                 int64_t ld);
// acc[r * d + x] += sum_t p[r * ld + t] * v_t[x] over the n packed values.
void gemm_accumulate(const GemmScratch& s, int64_t n, const float* p, int64_t ld, int rows, int d, float* acc);

// out[r * ld + t] = scale * (q[r] . k_t) for the chunk's keys (gemm_reads(c)), writing only
// its n columns: the statistics passes' scoring (attention_stats.cpp), keys packed once per tile.
void gemm_chunk_scores(const Chunk& c, const float* q, int rows, int d, float scale, float* out, int64_t ld,
                       GemmScratch& s);

}  // namespace vlkv::attn
