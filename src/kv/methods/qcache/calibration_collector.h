// Attention maps of adjacent layers during a full-precision prefill, compared by
// Jensen–Shannon divergence (Q Cache calibration). The decoder hands each layer's q and k
// chunk by chunk; the collector keeps the prompt's keys per layer and, for a sample of each
// chunk's queries, that query's attention map (per query head, over the keys it sees) of
// the previous layer only - never an n x n matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/token_kind.h"

namespace vlkv::calibration {

struct CollectorShape {
  int n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 0;              // softmax scale of q.k
  int queries_per_chunk = 16;   // sampled queries of each chunk: evenly spaced, the last one included
};

class AttentionMapCollector {
 public:
  explicit AttentionMapCollector(const CollectorShape& shape);

  // A new prompt: forgets the previous prompt's keys.
  void begin_prompt();
  // Layer `layer` of the next chunk (layers 0..n_layers-1 in order for each chunk).
  //   q: [n, n_heads, head_dim], k: [n, n_kv_heads, head_dim] post-RoPE; kinds: [n]
  void add(int layer, int64_t n, const float* q, const float* k, const TokenKind* kinds);

  // Mean JSD between layers (l, l + 1), over sampled queries and query heads:
  // whole maps, and maps restricted to the visual keys (renormalized; queries that see
  // no visual key skipped). [n_layers - 1] each; NaN where nothing was sampled.
  std::vector<double> jsd_adjacent() const;
  std::vector<double> jsd_adjacent_visual() const;
  int64_t n_queries() const { return n_queries_; }
  bool saw_visual() const { return saw_visual_; }

  // One query head's attention map over keys [0, n_keys): softmax(scale * q . k_j), k rows
  // of one kv head with stride `stride` floats. Public for tests.
  static void attention_map(const float* q, const float* k, int64_t stride, int64_t n_keys, int head_dim, float scale,
                            float* p);

 private:
  CollectorShape shape_;
  std::vector<std::vector<float>> keys_;  // [n_layers][n_seen, n_kv_heads, head_dim] this prompt's keys
  std::vector<TokenKind> kinds_;          // [n_seen]
  int64_t chunk_first_ = 0;               // first token of the current chunk
  std::vector<int64_t> sampled_;          // this chunk's sampled query tokens (prompt index)
  std::vector<float> prev_maps_;          // [sampled, n_heads, chunk_first + n] previous layer's maps
  std::vector<double> sum_, sum_visual_;  // [n_layers - 1]
  std::vector<int64_t> cnt_, cnt_visual_;
  int64_t n_queries_ = 0;
  bool saw_visual_ = false;
};

}  // namespace vlkv::calibration
