// AKVQ-VL's per-(sequence, layer) state: per kv head the kinds and positions of the rows
// folded into each class (in class order), the window's pivot flags, and how a head's
// segments map to the statistics' key order (storage order) and back.
//
// Per (layer, kv head) segments by tag: kLow (bits codec), kText (text_bits codec, TSA
// text tokens), kPivot (f16, PSA pivots), kWindow (f16, sequence order), kLowStage and
// kTextStage (f16: a tiled class's rows not yet in a whole tile). A class's rows in the
// order they were folded (its "class order") are its code segment's rows, then its
// staging segment's. Storage order is not sequence order in general (the segment list
// changes as the window and the staging are rebuilt); stored_positions() lets read_back
// return sequence order.
// The statistics list a head's keys in storage order (AttentionStats), so the layer state
// keeps, besides the tokens' kinds in sequence order (runs), per head the kinds and
// positions of the rows folded into each class in class order (runs again: a few per
// class), the window rows' pivot flags and the head's pivot count.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/codec.h"
#include "kv/kv_bytes.h"
#include "kv/layer_editor.h"
#include "kv/methods/akvq_vl/saliency.h"

namespace vlkv::akvq {

// Sequence positions as runs of consecutive positions: a class segment holds few runs
// (an image, the text around it, generated text, <= n_pivots pivots), so the layer state
// that holds them clones cheaply.
class PosRuns {
 public:
  void append(int64_t from, int64_t to) {  // positions [from, to), from >= every held one
    if (from >= to) return;
    if (!start_.empty() && start_.back() + len_.back() == from) len_.back() += to - from;
    else start_.push_back(from), len_.push_back(to - from);
    n_ += to - from;
  }
  int64_t size() const { return n_; }
  void save(ByteWriter& w) const {
    w.vec(start_);
    w.vec(len_);
    w.put<int64_t>(n_);
  }
  // Runs as append() leaves them (positive lengths, increasing non-touching starts, n_ their
  // sum), every position in [0, max_pos).
  bool load(ByteReader& r, int64_t max_pos) {
    start_ = r.vec<int64_t>();
    len_ = r.vec<int64_t>();
    n_ = r.get<int64_t>();
    if (!r.ok() || len_.size() != start_.size()) return false;
    int64_t sum = 0, end = 0;
    for (size_t i = 0; i < start_.size(); ++i) {
      if (len_[i] <= 0 || start_[i] < end || (i > 0 && start_[i] == end) || len_[i] > max_pos - start_[i]) return false;
      end = start_[i] + len_[i];
      sum += len_[i];
    }
    return sum == n_;
  }
  // Appends entries [from, to) (0-based, in append order) to out.
  void expand(int64_t from, int64_t to, std::vector<int64_t>* out) const {
    int64_t first = 0;  // entry index of run r's first position
    for (size_t r = 0; r < start_.size() && first < to; first += len_[r], ++r)
      for (int64_t e = std::max(from, first); e < std::min(to, first + len_[r]); ++e) out->push_back(start_[r] + e - first);
  }

 private:
  std::vector<int64_t> start_, len_;  // [n_runs]
  int64_t n_ = 0;                     // entries
};

// One class's codes: the same rows codec for K and V, or key tiles and value tiles.
struct ClassCodecs {
  std::shared_ptr<const Codec> k, v;
  bool tiled = false;
};

// Per kv head: the window rows' pivot flags, the pivots chosen so far, and the kinds and
// positions of the rows folded into each class in class order: the kinds to read the
// statistics' keys, which come in storage order (AttentionStats), the positions for
// Method::stored_positions (read_back in sequence order).
struct AkvqHead {
  std::vector<uint8_t> window_pivot;  // [window rows] 1 = pivot
  int n_pivots = 0;
  KindRuns folded[3];           // [kLow, kText, kPivot]
  PosRuns folded_pos[3];              // [kLow, kText, kPivot]
};

class AkvqState final : public LayerState {
 public:
  std::unique_ptr<LayerState> clone() const override { return std::make_unique<AkvqState>(*this); }
  bool save(ByteWriter& w) const override {
    w.put<uint8_t>(decided ? 1 : 0);
    w.put<uint8_t>(static_cast<uint8_t>(pattern));
    w.put<uint8_t>(stats_seen ? 1 : 0);
    kinds.save(w);
    w.put<uint64_t>(heads.size());
    for (const AkvqHead& h : heads) {
      w.vec(h.window_pivot);
      w.put<int32_t>(h.n_pivots);
      for (const KindRuns& k : h.folded) k.save(w);
      for (const PosRuns& p : h.folded_pos) p.save(w);
    }
    return true;
  }
  // Sizes as the layer's segments hold rows: the kinds of every token, per head the window's
  // pivot flags and each class's kinds and positions (its code and staging segments' rows).
  bool load(ByteReader& r, const LayerCache* layer) override {
    if (!layer) return false;
    const uint8_t d = r.get<uint8_t>(), p = r.get<uint8_t>(), s = r.get<uint8_t>();
    if (!r.ok() || d > 1 || p > 1 || s > 1 || !kinds.load(r) || kinds.size() != layer->n_tokens) return false;
    decided = d == 1;
    pattern = static_cast<Pattern>(p);
    stats_seen = s == 1;
    const uint64_t n_heads = r.get<uint64_t>();
    if (!r.ok() || (n_heads != 0 && n_heads != layer->heads.size())) return false;
    if (n_heads == 0) return layer->n_tokens == 0;
    heads.resize(n_heads);
    for (size_t h = 0; h < n_heads; ++h) {
      AkvqHead& hs = heads[h];
      int64_t rows[kNumTags] = {};
      for (const Segment& seg : layer->heads[h].segments) {
        if (seg.tag >= kNumTags) return false;
        rows[class_of_tag(seg.tag)] += seg.n_tokens;
      }
      hs.window_pivot = r.vec<uint8_t>();
      hs.n_pivots = r.get<int32_t>();
      if (!r.ok() || static_cast<int64_t>(hs.window_pivot.size()) != rows[kTagWindow] || hs.n_pivots < 0) return false;
      for (int c = 0; c < 3; ++c)
        if (!hs.folded[c].load(r) || hs.folded[c].size() != rows[c]) return false;
      for (int c = 0; c < 3; ++c)
        if (!hs.folded_pos[c].load(r, layer->n_tokens) || hs.folded_pos[c].size() != rows[c]) return false;
    }
    return true;
  }
  bool decided = false;          // pattern set from statistics (auto) at least once
  Pattern pattern = Pattern::kPsa;
  bool stats_seen = false;       // a prefill step brought statistics (no first-tokens fallback)
  KindRuns kinds;          // every token stored in this layer, sequence order
  std::vector<AkvqHead> heads;   // [n_kv_heads]
};

// Class order index of a class segment's first row: a staging segment holds the class's
// last rows, its code segment the first ones. class_rows: the rows folded into the class.
inline int64_t class_first_row(const Segment& seg, int64_t class_rows) {
  return is_stage_tag(seg.tag) ? class_rows - seg.n_tokens : 0;
}

// Kinds of head h's keys in step key order: its segments as listed, then the step's
// tokens (st.kinds holds the step's already; the window is the last n_window cached).
inline KindRuns key_kinds(const LayerEditor& ed, int h, int64_t n_cached, const AkvqState& st) {
  const AkvqHead& hs = st.heads[h];
  const int64_t n_window = static_cast<int64_t>(hs.window_pivot.size());
  KindRuns out;
  const auto& segs = ed.segments(h);
  for (size_t i = 0; i < segs.size(); ++i) {
    const uint32_t tag = segs[i].tag;
    if (tag == kTagWindow) {
      out.append(st.kinds, n_cached - n_window, n_cached);
    } else {
      const KindRuns& kinds = hs.folded[class_of_tag(tag)];
      const int64_t first = class_first_row(segs[i], kinds.size());
      out.append(kinds, first, first + segs[i].n_tokens);
    }
  }
  out.append(st.kinds, n_cached, st.kinds.size());
  return out;
}
// Key index (step key order) of head h's first window row: the rows of the segments before it.
inline int64_t window_key0(const LayerEditor& ed, int h) {
  int64_t key = 0;
  const auto& segs = ed.segments(h);
  for (size_t i = 0; i < segs.size() && segs[i].tag != kTagWindow; ++i) key += segs[i].n_tokens;
  return key;
}

// The class a folded row goes to: PSA pivots and the rest; TSA text and the rest.
inline uint32_t class_of(Pattern p, TokenKind kind, uint8_t pivot) {
  if (p == Pattern::kPsa) return pivot ? kTagPivot : kTagLow;
  return is_text(kind) ? kTagText : kTagLow;
}

}  // namespace vlkv::akvq
