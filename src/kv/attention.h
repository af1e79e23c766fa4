// Attention of one (sequence, layer) step: the new tokens' queries attend over the
// cached segments (fused codec scores/accumulate, no f32 copy of the cache) and over
// the new tokens themselves (causal, full f32), merged with an online softmax,
// flash-decoding style (cached chunks split across threads, then merged). Reads the
// cache only; storing the new tokens is the method's job afterwards.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kv/codec.h"
#include "kv/segment.h"

namespace vlkv {

struct AttendShape {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // query head h reads kv head h / (n_heads / n_kv_heads)
  int head_dim = 0;
};

// Softmax state of the probe queries of a step (kStatKeyMass): written by attend_layer
// (full attention) or probe_stats (before a sparse attention), read by probe_key_mass.
struct ProbeRows {
  const int* tokens = nullptr;  // [n] step token indices, ascending
  int n = 0;
  float* m = nullptr;   // [n, n_heads] final max logit of each probe row
  double* l = nullptr;  // [n, n_heads] final sum of exp(logit - m)
};

struct AttendOptions {
  // [n_kv_heads, n_cached + n_new] in step key order (AttentionStats) or null: attend only
  // the keys marked 1, plus each query's own key (Method::select_attended_keys).
  const uint8_t* keep = nullptr;
  // Non-null: the final softmax state of these rows is written out (ignored with keep).
  ProbeRows* probe_state = nullptr;
  // A second query set (a layer reusing another layer's scores for some keys): cached keys
  // of segments without K (key_source's) are scored with alt_q, and new token i with
  // from_alt[i] = 1 is the key alt_k[i] scored with alt_q; the other keys are scored with q.
  // One softmax over all of them, applied to this layer's values. Not with keep.
  const float* alt_q = nullptr;       // [n_new, n_heads, head_dim]
  const float* alt_k = nullptr;       // [n_new, n_kv_heads, head_dim]
  const uint8_t* from_alt = nullptr;  // [n_new]
  // Sliding-window layer (Gemma 3): > 0 masks key position pk for the query at position pq
  // when pq - pk >= window (llama.cpp's LLAMA_SWA_TYPE_STANDARD; never a later key). A
  // token's position is its index in the sequence: cached keys at cached_pos (below), new
  // token i at layer.n_tokens + i. 0: no window.
  int64_t window = 0;
  // [n_kv_heads, layer.n_tokens]: the sequence position of each cached key in storage order
  // (Method::stored_positions); null when storage order is sequence order. Read only with window.
  const int64_t* cached_pos = nullptr;
  // The new tokens see each other in full instead of causally (a Gemma 3 image chunk,
  // libmtmd's non-causal decode); the window still applies.
  bool non_causal = false;
};

// layer:      the layer as at the last commit (cached tokens to attend over).
// key_source: for segments without K (a layer sharing another's keys), the layer whose
//             segment of the same index supplies the keys; null when every segment has its own K.
// f32:        the f32 codec (used to run the fused kernels over the new tokens).
//   q:   [n_new, n_heads, head_dim]     post-RoPE
//   k,v: [n_new, n_kv_heads, head_dim]
//   out: [n_new, n_heads, head_dim]     softmax(scale * q.k) v over cached + causal new tokens
//                                       (options: sparse, windowed, non-causal)
void attend_layer(const LayerCache& layer, const LayerCache* key_source, const Codec& f32, const float* q,
                  const float* k, const float* v, int n_new, float scale, float* out, const AttendShape& shape,
                  ThreadPool& pool, const AttendOptions& options = {});

// The share of a full attention's work (query token x key pairs) that attend_layer does
// with this keep mask (AttendOptions::keep): the cached keys of the runs it reads (granules
// with a kept key, attention_chunks.h) and the kept new keys each query sees, plus itself.
// Bookkeeping only (no scores): O(n_kv_heads * (n_cached + n_new)).
double sparse_attention_work(const LayerCache& layer, const LayerCache* key_source, const uint8_t* keep, int n_new,
                             const AttendShape& shape);

// A sparse attention is run only when it does at most this share of the full attention's
// work: it pays for the masking of the unkept keys it still reads (the selects around the
// softmax) and for the mask's selection; flat attention keeps most keys and saves little.
// See KvCache::attend (kv_cache.cpp).
constexpr double kMaxSparseWork = 0.85;

}  // namespace vlkv
