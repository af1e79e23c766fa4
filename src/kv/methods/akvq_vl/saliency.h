// AKVQ-VL's saliency logic (arXiv 2501.15021) as pure functions over the prefill's
// attention statistics (AttentionStats::key_mass): which pattern a layer shows (TSA,
// text-salient; PSA, pivot-token-salient) and which tokens are its pivots. Used by
// akvq_vl.cpp and tested on hand-made masses.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "kv/kv_bytes.h"
#include "kv/token_kind.h"

namespace vlkv::akvq {

enum class Pattern : uint8_t { kTsa, kPsa };

// Segment tags of method akvq_vl per (layer, kv head): low-bit rows, TSA text rows at
// text_bits, PSA pivots in f16, the f16 recent window; and the f16 staging of the low and
// text classes (their < 16 newest rows while the class's codes are in 16-token tiles).
constexpr uint32_t kTagLow = 0, kTagText = 1, kTagPivot = 2, kTagWindow = 3, kTagLowStage = 4, kTagTextStage = 5;
constexpr int kNumTags = 6;

// The class (kTagLow, kTagText, kTagPivot) whose rows a segment holds; kTagWindow for the window.
inline uint32_t class_of_tag(uint32_t tag) {
  return tag == kTagLowStage ? kTagLow : tag == kTagTextStage ? kTagText : tag;
}
inline bool is_stage_tag(uint32_t tag) { return tag == kTagLowStage || tag == kTagTextStage; }
inline uint32_t stage_tag_of(uint32_t cls) { return cls == kTagText ? kTagTextStage : kTagLowStage; }

inline const char* pattern_name(Pattern p) { return p == Pattern::kTsa ? "tsa" : "psa"; }

// TSA's "text" side: text and special tokens (chat markers, image delimiters).
inline bool is_text(TokenKind k) { return k != TokenKind::kVisual; }

// The kinds of a sequence's tokens as runs: a VLM prompt has a handful (text, image,
// text, then generated text), so the per-layer state that holds them clones cheaply.
class KindRuns {
 public:
  void append(const TokenKind* kinds, int64_t n) {
    for (int64_t i = 0; i < n; ++i) append_run(kinds[i], 1);
  }
  int64_t size() const { return n_; }
  // Kind of token t, 0 <= t < size().
  TokenKind at(int64_t t) const {
    const auto it = std::upper_bound(start_.begin(), start_.end(), t);
    return kind_[static_cast<size_t>(it - start_.begin()) - 1];
  }
  size_t n_runs() const { return kind_.size(); }
  // Appends tokens [from, to) of src.
  void append(const KindRuns& src, int64_t from, int64_t to) {
    while (from < to) {
      const size_t r = static_cast<size_t>(std::upper_bound(src.start_.begin(), src.start_.end(), from) -
                                           src.start_.begin()) - 1;
      const int64_t end = std::min(to, r + 1 < src.start_.size() ? src.start_[r + 1] : src.n_);
      append_run(src.kind_[r], end - from);
      from = end;
    }
  }
  void append_run(TokenKind kind, int64_t n) {
    if (n <= 0) return;
    if (kind_.empty() || kind_.back() != kind) {
      start_.push_back(n_);
      kind_.push_back(kind);
    }
    n_ += n;
  }
  void save(ByteWriter& w) const {
    w.vec(start_);
    w.vec(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(kind_.data()),
                               reinterpret_cast<const uint8_t*>(kind_.data()) + kind_.size()));
    w.put<int64_t>(n_);
  }
  // Runs as append_run leaves them: starting at 0, increasing, kinds valid, n_ past the last start.
  bool load(ByteReader& r) {
    start_ = r.vec<int64_t>();
    const std::vector<uint8_t> kinds = r.vec<uint8_t>();
    n_ = r.get<int64_t>();
    if (!r.ok() || kinds.size() != start_.size() || n_ < 0) return false;
    if (!start_.empty() && (start_[0] != 0 || start_.back() >= n_)) return false;
    if (start_.empty() && n_ != 0) return false;
    kind_.clear();
    for (size_t i = 0; i < kinds.size(); ++i) {
      if (kinds[i] > static_cast<uint8_t>(TokenKind::kSpecial) || (i > 0 && start_[i] <= start_[i - 1])) return false;
      kind_.push_back(static_cast<TokenKind>(kinds[i]));
    }
    return true;
  }

 private:
  std::vector<int64_t> start_;   // [n_runs] first token of each run
  std::vector<TokenKind> kind_;  // [n_runs]
  int64_t n_ = 0;
};

// Indices of the k largest x[i] (NaN counts as -inf), largest first, ties: earlier first.
inline std::vector<int64_t> top_k(const float* x, int64_t n, int64_t k) {
  k = std::clamp<int64_t>(k, 0, n);
  auto score = [&](int64_t i) { return std::isnan(x[i]) ? -INFINITY : x[i]; };
  auto before = [&](int64_t a, int64_t b) { return score(a) > score(b) || (score(a) == score(b) && a < b); };
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);  // O(n): prompts may be long
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end(), before);
  return idx;
}

// One layer's attention mass, summed over its kv heads: on each head's top n_pivots
// keys, and on the text keys outside them (a sink token is usually text: counting it on
// both sides would call every sink layer text-salient).
struct MassShares {
  double pivot = 0, text = 0, total = 0;  // raw mass
  int64_t n_visual = 0;                   // visual keys seen (over heads)

  //   mass: [n] one kv head's mass per key (AttentionStats::key_mass row, step key order);
  //   kinds: the kinds of those n keys in the same order. Non-finite or negative mass counts 0.
  void add_head(const float* mass, int64_t n, const KindRuns& kinds, int n_pivots) {
    std::vector<float> m(mass, mass + n);  // [n]
    for (float& e : m)
      if (!(std::isfinite(e) && e > 0)) e = 0;
    std::vector<uint8_t> pivot(static_cast<size_t>(n), 0);
    for (int64_t t : top_k(m.data(), n, n_pivots)) {
      pivot[t] = 1;
      this->pivot += m[t];
    }
    for (int64_t t = 0; t < n; ++t) {
      const bool is_text_key = is_text(kinds.at(t));
      n_visual += !is_text_key;
      if (is_text_key && !pivot[t]) text += m[t];
      total += m[t];
    }
  }
};

// TSA when the layer sees visual tokens and its text tokens (pivots aside) draw more of
// the mass than its pivots; PSA otherwise. Without visual tokens TSA's text/visual split
// is void, so such a layer is PSA (pivots f16, the rest low-bit). nullopt: no usable
// mass (the caller keeps its fallback).
inline std::optional<Pattern> detect_pattern(const MassShares& s) {
  if (!(s.total > 0) || !std::isfinite(s.total)) return std::nullopt;
  return s.n_visual > 0 && s.text > s.pivot ? Pattern::kTsa : Pattern::kPsa;
}

// Keys [key0, key0 + n) of the step key order are full-precision rows [slot0, slot0 + n).
struct KeyRange {
  int64_t key0 = 0, slot0 = 0, n = 0;
};

// Pivots of one kv head among the rows still in full precision (the window and the
// step's new tokens: folded rows cannot be promoted back), found through `ranges`. A
// candidate becomes a pivot when it ranks among the top n_pivots of all n keys by mass
// and the head's budget (n_pivots less the pivots it has) allows, largest mass first.
//   mass: [n] this head's mass per key (step key order); flags: [rows] in/out, 1 = pivot.
// Returns the number of new pivots.
inline int select_pivots(const float* mass, int64_t n, const std::vector<KeyRange>& ranges, int n_pivots, int budget,
                         uint8_t* flags) {
  int added = 0;
  for (int64_t t : top_k(mass, n, n_pivots)) {
    if (added >= budget) break;
    if (!(mass[t] > 0)) continue;
    for (const KeyRange& r : ranges) {
      if (t < r.key0 || t >= r.key0 + r.n) continue;
      uint8_t& f = flags[r.slot0 + (t - r.key0)];
      if (!f) {
        f = 1;
        ++added;
      }
    }
  }
  return added;
}

}  // namespace vlkv::akvq
