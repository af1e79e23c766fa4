// What the decoder calls on the KV cache in a step: attend (or store without attention) each
// layer, then commit or roll back, and the method's plan of a layer. One of KvCache's two
// narrow views (the other: kv_cache_stats.h); the decoder needs nothing else of the cache.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kv/kv_types.h"
#include "kv/token_kind.h"
#include "vlkv/status.h"

namespace vlkv {

class KvStepCache {
 public:
  virtual ~KvStepCache() = default;

  virtual int64_t n_tokens(SeqId seq) const = 0;    // tokens fully committed (all layers)

  // One attention layer for n_new new tokens of sequence seq, at positions
  // n_tokens(seq) .. n_tokens(seq)+n_new-1. The new tokens attend causally over
  // the cached tokens and each other. Then the method stores their K/V.
  //   q:   [n_new, n_heads, head_dim]     post-RoPE
  //   k,v: [n_new, n_kv_heads, head_dim]  post-RoPE keys
  //   kinds: [n_new]
  //   out: [n_new, n_heads, head_dim]     softmax(q·k * scale) · v
  //   visual_similarity: [n_new] or null, for methods that select visual tokens by their
  //     similarity to the text (StoreInput::visual_similarity)
  // Call for layers 0..n_layers-1 in order, then commit(seq, n_new).
  // OutOfMemory (pool exhausted) leaves the sequence as it was before this step.
  // Every layer passes its own q and k: where the method's plan shares an earlier layer's
  // queries and keys (LayerPlan::score_layer), the cache uses those it kept from that layer.
  //   non_causal: the new tokens see each other in full, not causally (a Gemma 3 image
  //     chunk). A sliding-window layer (KvGeometry::layer_window) masks keys that left the
  //     window of each query, cached (whatever the codec) and new alike.
  virtual Status attend(SeqId seq, int layer, const float* q, const float* k, const float* v,
                        const TokenKind* kinds, int n_new, float scale, float* out, ThreadPool& pool,
                        const float* visual_similarity = nullptr, bool non_causal = false) = 0;
  // Benchmarking aid (vlkv bench --fill random): attend() without the attention - the
  // method stores one layer's new K/V (kinds non-null) through its normal store path, so
  // segments, windows and folds are what a prefill would leave, at no quadratic cost. Same
  // step protocol (every layer, then commit). A layer whose method needs attention
  // statistics takes them from queries q ([n_new, n_heads, head_dim], with scale, on
  // pool): only the probe rows are scored (no attention output), a fraction of attend()'s
  // cost; without q such a layer is Unsupported.
  virtual Status store_without_attention(SeqId seq, int layer, const float* k, const float* v,
                                         const TokenKind* kinds, int n_new, const float* q = nullptr,
                                         float scale = 0.0f, ThreadPool* pool = nullptr) = 0;
  virtual void commit(SeqId seq, int n_new) = 0;
  // Undo attend() calls made since the last commit (e.g. when a later layer ran out of memory).
  virtual void rollback(SeqId seq) = 0;

  // The method's plan of one layer for this sequence's next step of n_new tokens, or, once
  // the step has begun (layer 0 attended), of the current step: the decoder asks whether a
  // layer reads its own q/k (attend() asks the method once per layer and step itself).
  virtual LayerPlan next_step_plan(SeqId seq, int layer, int n_new) const = 0;
};

}  // namespace vlkv
