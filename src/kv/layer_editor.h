// What a method may do to one (sequence, layer) of the cache while storing a step:
// add / append to / read / remove segments. Allocates pages from the pool and
// records them in the pending step so rollback() can undo everything, and defers
// frees of pre-step pages to commit(). Used from one thread at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/segment.h"
#include "vlkv/status.h"

namespace vlkv {

class LayerEditor {
 public:
  LayerEditor(PagePool& pool, LayerCache& layer, PendingStep& pending, int layer_index, int head_dim)
      : pool_(pool), layer_(layer), pending_(pending), layer_index_(layer_index), head_dim_(head_dim) {}

  int layer() const { return layer_index_; }
  int head_dim() const { return head_dim_; }
  int n_kv_heads() const { return static_cast<int>(layer_.heads.size()); }
  LayerState* state() { return layer_.state.get(); }
  const std::vector<Segment>& segments(int kv_head) const { return layer_.heads[kv_head].segments; }

  // A new empty segment at the end of kv_head's list; returns its index.
  // k_codec may be null (no K stored: lazy layer). Codecs must outlive the cache contents.
  int add_segment(int kv_head, const Codec* k_codec, const Codec* v_codec, uint32_t tag);

  // Encodes n_tokens rows at the end of segment `seg`, allocating pages as needed.
  //   k, v: rows r at k + r * row_stride, head_dim floats each ([n_tokens, head_dim] strided).
  //   k is ignored (may be null) when the segment has no K stream.
  // n_tokens and the segment's size must be multiples of both codecs' tokens_per_block.
  // OutOfMemory: the segment may hold part of the rows; the cache rolls the step back.
  Status append(int kv_head, int seg, const float* k, const float* v, int64_t row_stride, int64_t n_tokens);

  // Scalar-reference decode of tokens [first, first + n) of a segment (block-aligned or not).
  //   k, v: [n, head_dim] out (k untouched when absent; either may be null to skip).
  void read(int kv_head, int seg, int64_t first, int64_t n, float* k, float* v) const;

  // Drops a segment: pages taken in this step are freed now, older ones at commit().
  void remove_segment(int kv_head, int seg);

 private:
  Status append_stream(Stream& s, int64_t first_token, const float* x, int64_t row_stride, int64_t n_tokens);
  void release_stream(Stream& s);

  PagePool& pool_;
  LayerCache& layer_;
  PendingStep& pending_;
  int layer_index_;
  int head_dim_;
};

// Decodes tokens [first, first + n) of one stream into x: [n, head_dim].
void read_stream(const Stream& s, int64_t first, int64_t n, int head_dim, float* x);

}  // namespace vlkv
