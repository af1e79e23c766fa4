// The decoder's view of the KV cache: one object per loaded model holding every
// sequence's cache under one byte budget. Inside, a page pool + per-sequence page
// tables hold segments, each encoded by a codec chosen by the active method
// (see DESIGN.md "The KV cache"). The decoder only calls attend(); which codec
// stores what is the method's business.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_types.h"
#include "kv/token_kind.h"
#include "vlkv/status.h"

namespace vlkv {

struct KvCacheConfig {
  KvGeometry geometry;
  std::string method = "f16";   // registry name with parameters, e.g. "f32", "f16", "int4:g=64"
  uint64_t budget_bytes = 1ull << 30;  // the page pool's byte budget (--kv-budget)
  // A stream's pages hold as many whole blocks as fit this (one where a block is larger), so
  // a stream wastes less than this at its tail. 2 KiB: within 1.1x of the exact codec
  // bytes at 1K tokens for every method (tests/kv/page_tails_test.cpp); 64 KiB pages held
  // up to 3.8x there (methods with many streams per head).
  uint32_t page_bytes = 2 * 1024;
  int max_tokens_per_seq = 1 << 20;    // hard cap against absurd requests
  // Sliding-window layers (KvGeometry::layer_window) free the pages of tokens that left
  // their window as the sequence advances (window_trim.h). false: keep every token (the
  // attention is the same; for comparisons and measurements).
  bool free_out_of_window = true;
};

// Not thread safe: the engine serializes calls; attend() parallelizes internally on
// the pool it is given.
class KvCache {
 public:
  // InvalidArgument for an unknown method or bad parameters/geometry.
  static Result<std::unique_ptr<KvCache>> create(const KvCacheConfig& config);
  virtual ~KvCache() = default;

  // A new empty sequence stored with the configured method, or with its own method spec
  // (one pool, each sequence its own method; InvalidArgument for a bad spec or a codec
  // whose block does not fit a page).
  virtual Result<SeqId> add_sequence(const std::string& method = "") = 0;
  virtual void remove_sequence(SeqId seq) = 0;       // frees its pages
  virtual Status copy_sequence(SeqId src, SeqId dst) = 0;  // dst must exist; replaces its contents
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

  // Memory accounting, exact: bytes of pages held now and the pool's budget.
  virtual uint64_t bytes_in_use() const = 0;
  virtual uint64_t budget_bytes() const = 0;
  // Stored bits per K/V element including metadata, for the active method (as configured).
  virtual double bits_per_element() const = 0;
  virtual std::string method_name() const = 0;
  // The method reads attend()'s visual_similarity (else the caller may pass null).
  virtual bool uses_visual_similarity() const { return false; }
  // The same for the method one sequence is stored with (the prefix cache keys its visual
  // rows by the similarity then).
  virtual bool sequence_uses_visual_similarity(SeqId /*seq*/) const { return uses_visual_similarity(); }
  // Method::describe_sequence for one sequence ("" when the method decides nothing per sequence).
  virtual std::string describe_sequence(SeqId /*seq*/) const { return {}; }
  // Method::without_visual_tokens: how the method degrades on a text-only sequence ("" if not).
  virtual std::string without_visual_tokens() const { return {}; }

  // ---- additions for the engine, the benchmarks and the tests ----
  // Steady-state bytes per token over all layers, K and V (the method's report).
  virtual double bytes_per_token() const = 0;
  // Tokens stored in one layer: n_tokens(seq), plus n_new once attended in the current step.
  virtual int64_t layer_tokens(SeqId seq, int layer) const = 0;
  // Pages held by one sequence, in bytes (sum over sequences == bytes_in_use()).
  virtual uint64_t sequence_bytes(SeqId seq) const = 0;
  // Debug / tests: the stored K and V rows of one (seq, layer, kv head), decoded with
  // the codecs' scalar reference, in storage order (segment by segment).
  //   k, v: resized to [layer_tokens, head_dim]; k rows of a layer storing no K are left 0.
  virtual Status read_back(SeqId seq, int layer, int kv_head, std::vector<float>* k,
                           std::vector<float>* v) const = 0;
  // The method's plan of one layer for this sequence's next step of n_new tokens, or, once
  // the step has begun (layer 0 attended), of the current step (tests, reports, and the
  // decoder's question whether a layer reads its own q/k; attend() asks the method once per
  // layer and step itself).
  virtual LayerPlan next_step_plan(SeqId seq, int layer, int n_new) const = 0;
  // Exact bytes of the codec blocks one sequence holds now (page tails excluded): what the
  // method really stores for this sequence's tokens and kinds (eval's measured ratio).
  virtual double stored_bytes(SeqId seq) const = 0;

  // ---- per-sequence methods and admission ----
  // The canonical spec of the method seq is stored with.
  virtual std::string sequence_method(SeqId seq) const = 0;
  // An upper bound of the page bytes a sequence of the method ("": the configured one)
  // holds once n_tokens are stored: its codec bytes (windows included, the data-dependent
  // maximum) plus a partly used page per stream, plus the pages a step may hold twice while
  // it folds a window. What a scheduler reserves; InvalidArgument for a bad spec.
  virtual Result<uint64_t> max_bytes_for_tokens(int64_t n_tokens, const std::string& method = "") = 0;
  virtual uint32_t page_bytes() const = 0;

  // ---- saving a sequence to a file (kv_sequence_io.h) ----
  // Appends seq's cache (segments, codec blocks as stored, the method's state) to out;
  // Unsupported naming the method when its state cannot be saved exactly.
  virtual Status save_sequence(SeqId /*seq*/, std::string* /*out*/) const { return unsupported("saving a KV sequence"); }
  // A new sequence stored with `method` from bytes save_sequence wrote, checked whole before
  // a page is taken (InvalidFile, or OutOfMemory when it does not fit the free budget).
  virtual Result<SeqId> load_sequence(const std::string& /*method*/, const uint8_t* /*data*/, size_t /*size*/) {
    return unsupported("loading a KV sequence");
  }
};

}  // namespace vlkv
