// Per-sequence page tables: which pages (and segments) each sequence holds, kept
// apart from page contents (PagePool). Add / remove / copy sequences. Not thread
// safe: the owning KvCache serializes calls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kv/kv_types.h"
#include "kv/page_pool.h"
#include "kv/segment.h"
#include "vlkv/status.h"

namespace vlkv {

// An uncommitted step (attend() calls since the last commit) of one sequence.
struct PendingStep {
  int n_new = -1;                                 // -1: no step in progress
  std::vector<std::optional<LayerCache>> before;  // [n_layers] layer as at the last commit, once attended
  std::vector<PageId> new_pages;                  // allocated since the last commit (freed by rollback)
  std::vector<PageId> deferred_free;              // released since the last commit (freed by commit)
  std::unique_ptr<LayerState> state_before;       // the method's sequence state at the last commit
  std::vector<LayerPlan> plans;                   // [n_layers] the method's plans for this step
  std::vector<uint8_t> shared_wanted;             // [n_layers] 1: a later layer's plan reads this layer's q and k
  std::vector<std::vector<float>> shared_q;       // [n_layers][n_new, n_heads, head_dim] of wanted layers, once attended
  std::vector<std::vector<float>> shared_k;       // [n_layers][n_new, n_kv_heads, head_dim]
  bool active() const { return n_new >= 0; }
};

class Method;

struct SequenceCache {
  const Method* method = nullptr;  // the sequence's KV method (owned by the cache, outlives it)
  int64_t n_tokens = 0;            // committed tokens (all layers)
  std::vector<LayerCache> layers;  // [n_layers]
  std::unique_ptr<LayerState> state;  // the method's per-sequence state (Method::new_sequence_state), may be null
  PendingStep pending;
};

class PageTable {
 public:
  explicit PageTable(PagePool& pool) : pool_(pool) {}
  ~PageTable();
  PageTable(const PageTable&) = delete;
  PageTable& operator=(const PageTable&) = delete;

  SeqId add(SequenceCache seq);
  // Frees every page the sequence holds (including an uncommitted step's). Unknown seq: check failure.
  void remove(SeqId seq);
  // Deep copy of src's pages into dst (which must exist; its old pages are freed).
  // Neither may have an uncommitted step. OutOfMemory leaves dst unchanged.
  // Future: copy-on-write (page reference counts in the pool, copy on append to a shared page).
  Status copy(SeqId src, SeqId dst);

  SequenceCache* find(SeqId seq);
  const SequenceCache* find(SeqId seq) const;
  std::vector<SeqId> ids() const;
  // Pages held by seq (tree + pages awaiting a deferred free).
  int64_t n_pages(SeqId seq) const;
  // Bytes of those pages (they differ in size by stream).
  uint64_t n_bytes(SeqId seq) const;

  // Frees every page of the sequence's tree and pending step (helper for remove/copy).
  void release(SequenceCache& seq);

 private:
  PagePool& pool_;
  std::map<SeqId, SequenceCache> seqs_;
  SeqId next_id_ = 0;
};

}  // namespace vlkv
