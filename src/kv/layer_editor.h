// What a method may do to one (sequence, layer) of the cache while storing a step:
// add / append to / read / remove segments. Allocates pages from the pool and
// records them in the pending step so rollback() can undo everything, and defers
// frees of pre-step pages to commit(). Used from one thread at a time.
// A wrapping method (Q Cache) hands its inner method a view() that may drop K streams
// and may show only the segments of one "space" (indices among those), so the inner
// method never knows it is wrapped.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "kv/segment.h"
#include "vlkv/status.h"

namespace vlkv {

// The segments of one kv head as a LayerEditor (or a view of it) sees them.
class SegmentList {
 public:
  SegmentList(const std::vector<Segment>& all, std::vector<int> index) : all_(all), index_(std::move(index)) {}
  size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  const Segment& operator[](size_t i) const { return all_[static_cast<size_t>(index_[i])]; }

 private:
  const std::vector<Segment>& all_;
  std::vector<int> index_;  // visible position -> index in all_
};

class LayerEditor {
 public:
  LayerEditor(PagePool& pool, LayerCache& layer, PendingStep& pending, int layer_index, int head_dim)
      : pool_(pool), layer_(layer), pending_(pending), layer_index_(layer_index), head_dim_(head_dim) {}

  int layer() const { return layer_index_; }
  int head_dim() const { return head_dim_; }
  int n_kv_heads() const { return static_cast<int>(layer_.heads.size()); }
  LayerState* state() { return state_override_ ? state_override_ : layer_.state.get(); }
  // The method's per-sequence state (Method::new_sequence_state), shared by every layer and
  // every view; null when the method keeps none.
  LayerState* sequence_state() const { return sequence_state_; }
  void set_sequence_state(LayerState* s) { sequence_state_ = s; }
  SegmentList segments(int kv_head) const { return SegmentList(layer_.heads[kv_head].segments, visible(kv_head)); }

  // A view for a wrapped method. space > 0: it sees (and adds) only segments of that space;
  // 0: all segments. store_k = false: segments it adds store no K (LayerPlan::stores_k: their
  // keys come from another layer). state: what its state() returns (null: this editor's).
  LayerEditor view(uint32_t space, bool store_k, LayerState* state) const {
    LayerEditor e(*this);
    e.space_ = space;
    e.store_k_ = store_k;
    e.state_override_ = state;
    return e;
  }

  // A new empty segment at the end of kv_head's list; returns its index.
  // k_codec may be null (no K stored: LayerPlan::stores_k). Codecs must outlive the cache contents.
  // reread: the method will read the segment's rows back (a staging window it folds), so
  // its pages are never freed when tokens leave a sliding window (Segment::reread).
  int add_segment(int kv_head, const Codec* k_codec, const Codec* v_codec, uint32_t tag, bool reread = false);

  // Encodes n_tokens rows at the end of segment `seg`, allocating pages as needed.
  //   k, v: rows r at k + r * row_stride, head_dim floats each ([n_tokens, head_dim] strided).
  //   k is ignored (may be null) when the segment has no K stream.
  // n_tokens and the segment's size must be multiples of both codecs' tokens_per_block.
  // OutOfMemory: the segment may hold part of the rows; the cache rolls the step back.
  Status append(int kv_head, int seg, const float* k, const float* v, int64_t row_stride, int64_t n_tokens);

  // Scalar-reference decode of tokens [first, first + n) of a segment (block-aligned or not);
  // the tokens' pages must be held (check failure on a freed page: see Segment::reread).
  //   k, v: [n, head_dim] out (k untouched when absent; either may be null to skip).
  void read(int kv_head, int seg, int64_t first, int64_t n, float* k, float* v) const;

  // Drops a segment: pages taken in this step are freed now, older ones at commit().
  void remove_segment(int kv_head, int seg);
  // Removes a segment's K stream (its keys will come from another layer: LayerPlan::stores_k),
  // pages freed as by remove_segment. No-op when it has none.
  void remove_k(int kv_head, int seg);
  // Frees one page of a segment's K (k_stream) or V stream whose tokens every later query
  // masks (they left a sliding window): its entry becomes kNoPage; freed now when taken in
  // this step, else at commit(), as by remove_segment. The page must be full (no later
  // append writes into it). Used by free_out_of_window (window_trim.h), not by methods.
  void free_page(int kv_head, int seg, bool k_stream, size_t page);
  // Every segment of kv_head (ignores the view's space), for Method::stored_positions.
  const std::vector<Segment>& all_segments(int kv_head) const { return layer_.heads[kv_head].segments; }

 private:
  Status append_stream(Stream& s, int64_t first_token, const float* x, int64_t row_stride, int64_t n_tokens);
  void release_stream(Stream& s);
  void release_page(PageId p);
  std::vector<int> visible(int kv_head) const;  // indices of the segments this editor sees
  int real_index(int kv_head, int seg) const;   // visible index -> index in the head's list

  PagePool& pool_;
  LayerCache& layer_;
  PendingStep& pending_;
  int layer_index_;
  int head_dim_;
  uint32_t space_ = 0;
  bool store_k_ = true;
  LayerState* state_override_ = nullptr;
  LayerState* sequence_state_ = nullptr;
};

// Decodes tokens [first, first + n) of one stream into x: [n, head_dim]; rows of freed
// pages (kNoPage) are left as they are.
void read_stream(const Stream& s, int64_t first, int64_t n, int head_dim, float* x);

}  // namespace vlkv
