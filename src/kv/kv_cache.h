// The KV cache: one object per loaded model holding every sequence's cache under one byte
// budget. Inside, a page pool + per-sequence page tables hold segments, each encoded by a
// codec chosen by the sequence's method (see DESIGN.md "The KV cache"). Two narrow views:
// what the decoder calls (KvStepCache, kv_step_cache.h) and what accounting, tests and
// benchmarks read (KvCacheStats, kv_cache_stats.h); KvCache adds sequences, methods, files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache_stats.h"
#include "kv/kv_step_cache.h"
#include "kv/kv_types.h"
#include "vlkv/status.h"

namespace vlkv {

class ByteSink;

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
class KvCache : public KvStepCache, public KvCacheStats {
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
  // The method reads attend()'s visual_similarity (else the caller may pass null).
  virtual bool uses_visual_similarity() const { return false; }
  // The same for the method one sequence is stored with (the prefix cache keys its visual
  // rows by the similarity then).
  virtual bool sequence_uses_visual_similarity(SeqId /*seq*/) const { return uses_visual_similarity(); }
  // Method::describe_sequence for one sequence ("" when the method decides nothing per sequence).
  virtual std::string describe_sequence(SeqId /*seq*/) const { return {}; }
  // Method::without_visual_tokens: how the method degrades on a text-only sequence ("" if not).
  virtual std::string without_visual_tokens() const { return {}; }

  // ---- per-sequence methods and admission ----
  // The canonical spec of the method seq is stored with.
  virtual std::string sequence_method(SeqId seq) const = 0;
  // An upper bound of the page bytes a sequence of the method ("": the configured one)
  // holds once n_tokens are stored: its codec bytes (windows included, the data-dependent
  // maximum) plus a partly used page per stream, plus the pages a step may hold twice while
  // it folds a window. What a scheduler reserves; InvalidArgument for a bad spec.
  virtual Result<uint64_t> max_bytes_for_tokens(int64_t n_tokens, const std::string& method = "") = 0;
  // The method's own figures ("": the configured one), as the method reports them: stored
  // bits per element incl. metadata, and the exact codec bytes of n_tokens (the data-dependent
  // maximum; no sliding-window frees, no page tails). InvalidArgument for a bad spec.
  virtual Result<double> method_bits_per_element(const std::string& method) = 0;
  virtual Result<double> method_bytes_for_tokens(int64_t n_tokens, const std::string& method) = 0;

  // ---- saving a sequence to a file (kv_sequence_io.h) ----
  // Appends seq's cache (segments, codec blocks as stored, the method's state) to out;
  // Unsupported naming the method when its state cannot be saved exactly.
  virtual Status save_sequence(SeqId /*seq*/, std::string* /*out*/) const { return unsupported("saving a KV sequence"); }
  // The same bytes into a sink (a file section written as it goes: kv_file.h's KvFileWriter).
  virtual Status save_sequence(SeqId /*seq*/, ByteSink* /*out*/) const { return unsupported("saving a KV sequence"); }
  // A new sequence stored with `method` from bytes save_sequence wrote, checked whole before
  // a page is taken (InvalidFile, or OutOfMemory when it does not fit the free budget).
  virtual Result<SeqId> load_sequence(const std::string& /*method*/, const uint8_t* /*data*/, size_t /*size*/) {
    return unsupported("loading a KV sequence");
  }
};

}  // namespace vlkv
