// What accounting, tests and benchmarks read of the KV cache: bytes and pages held, the
// method's bits, stored rows. One of KvCache's two narrow views (the other, what the decoder
// calls: kv_step_cache.h); reading never changes the cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "vlkv/status.h"

namespace vlkv {

class KvCacheStats {
 public:
  virtual ~KvCacheStats() = default;

  // Memory accounting, exact: bytes of pages held now and the pool's budget.
  virtual uint64_t bytes_in_use() const = 0;
  virtual uint64_t budget_bytes() const = 0;
  // Stored bits per K/V element including metadata, for the active method (as configured).
  virtual double bits_per_element() const = 0;
  virtual std::string method_name() const = 0;
  virtual uint32_t page_bytes() const = 0;

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
  // Exact bytes of the codec blocks one sequence holds now (page tails excluded): what the
  // method really stores for this sequence's tokens and kinds (eval's measured ratio).
  virtual double stored_bytes(SeqId seq) const = 0;
};

}  // namespace vlkv
