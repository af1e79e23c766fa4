// Cache bookkeeping for one sequence: per layer, per kv head, a list of segments;
// each segment is a run of tokens whose K and V rows live in pages, each stream
// encoded by one codec. Pure metadata: page contents belong to the PagePool.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/codec.h"
#include "kv/page_pool.h"

namespace vlkv {

class ByteWriter;
class ByteReader;
struct LayerCache;

// The K or the V rows of one segment. codec == nullptr: the stream is absent (a layer
// that reads another layer's keys stores no K: LayerPlan::stores_k).
struct Stream {
  const Codec* codec = nullptr;        // owned by the method, outlives the cache contents
  int32_t blocks_per_page = 0;         // blocks in each of the stream's pages
  int32_t block_bytes = 0;
  // Bytes of each of the stream's pages: whole blocks, no unused end (PagePool::allocate(bytes)).
  uint32_t page_bytes() const { return static_cast<uint32_t>(blocks_per_page) * static_cast<uint32_t>(block_bytes); }
  // [n_pages] in token order. kNoPage (page_data null): freed because every token of the
  // page left a sliding-window layer's window (KvCache frees them; never read again).
  std::vector<PageId> pages;
  std::vector<uint8_t*> page_data;     // [n_pages] pool.data(pages[i]), cached for views
  int64_t n_freed_pages = 0;           // entries of pages that are kNoPage

  bool present() const { return codec != nullptr; }
  int64_t tokens_per_page() const { return int64_t{blocks_per_page} * codec->tokens_per_block(); }
  // Whether every block of tokens [first, first + n) is in a page still held.
  bool live(int64_t first, int64_t n) const {
    if (n_freed_pages == 0 || n <= 0) return true;
    const int64_t tpp = tokens_per_page();
    for (int64_t p = first / tpp; p <= (first + n - 1) / tpp; ++p)
      if (pages[static_cast<size_t>(p)] == kNoPage) return false;
    return true;
  }
  // Tokens [first_token, first_token + n_tokens) as a kernel view; both ends on block boundaries.
  SegmentView view(int64_t first_token, int64_t n_tokens, int head_dim) const {
    SegmentView s;
    s.pages = page_data.data();
    s.first_block = first_token / codec->tokens_per_block();
    s.n_tokens = n_tokens;
    s.blocks_per_page = blocks_per_page;
    s.block_bytes = block_bytes;
    s.tokens_per_block = codec->tokens_per_block();
    s.head_dim = head_dim;
    return s;
  }
};

// A run of tokens of one (sequence, layer, kv head) stored with one K codec and one
// V codec. Segments only hold whole blocks: a method keeps the tail of an unfilled
// token group in a full-precision window segment until the group fills.
struct Segment {
  uint32_t tag = 0;      // method-defined role (e.g. 0 compressed, 1 residual window, 2 important)
  uint32_t space = 0;    // which wrapped method instance owns it (Q Cache VLA: 1 visual, 2 text; 0 unwrapped)
  int64_t n_tokens = 0;  // a multiple of both streams' tokens_per_block
  // The method reads this segment's rows back later (a full-precision staging window that
  // it folds): the cache never frees its pages early (LayerEditor::add_segment).
  bool reread = false;
  Stream k;              // [n_tokens, head_dim] in k.codec's layout (or absent)
  Stream v;              // [n_tokens, head_dim] in v.codec's layout
};

struct HeadCache {
  std::vector<Segment> segments;  // decode attention is order-independent over these
};

// Per-layer method state (e.g. kinds of window tokens, accumulated importance);
// small metadata outside the pool. clone() backs copy_sequence and rollback.
class LayerState {
 public:
  virtual ~LayerState() = default;
  virtual std::unique_ptr<LayerState> clone() const = 0;
  // Saving a sequence to a file (kv_sequence_io.h): writes everything the method will read
  // again; false where the state cannot be saved exactly yet (the file is then refused).
  virtual bool save(ByteWriter& /*w*/) const { return false; }
  // Restores what save() wrote into a fresh state (the method's new_*_state()); false for
  // bytes save() cannot have written: the reader is bounds-checked, and the state checks its
  // sizes against the layer's loaded segments (layer: null for a per-sequence state).
  virtual bool load(ByteReader& /*r*/, const LayerCache* /*layer*/) { return false; }
};

struct LayerCache {
  int64_t n_tokens = 0;            // tokens stored in this layer (committed + this step's, once attended)
  std::vector<HeadCache> heads;    // [n_kv_heads]
  std::unique_ptr<LayerState> state;  // may be null

  // Same page ids, cloned state: for snapshots (the pages themselves are not copied).
  LayerCache clone_meta() const {
    LayerCache c;
    c.n_tokens = n_tokens;
    c.heads = heads;
    if (state) c.state = state->clone();
    return c;
  }
  template <class F>
  void for_each_page(F&& f) const {
    for (const auto& h : heads)
      for (const auto& s : h.segments) {
        for (PageId p : s.k.pages)
          if (p != kNoPage) f(p);
        for (PageId p : s.v.pages)
          if (p != kNoPage) f(p);
      }
  }
};

}  // namespace vlkv
