// Full-precision staging of rows that a per-channel codec can only store in whole groups
// of G tokens: KIVI's residual window, a recent window with per-class staging, the
// 16-token tile staging of the int2/int4 methods and of AKVQ-VL's classes.
// A staging segment (f16/f32 rows, tokens_per_block 1) receives a step's new rows; once it
// holds at least keep + G rows, the oldest whole groups go to a sink (usually a compressed
// segment) so that keep <= staged < keep + G rows remain (all of them while fewer than
// keep + G): the count staged is a function of the rows seen alone. LayerEditor has no
// "drop the front", so a fold writes the remaining rows into a fresh staging segment and
// drops the old one (amortized keep / G row copies per token); a long step folds its bulk
// straight from the step's rows and never stages more than keep + 2G rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "kv/layer_editor.h"
#include "kv/method.h"

namespace vlkv::window_fold {

// Index of kv_head's first segment with this tag, or -1.
inline int find_segment(const LayerEditor& ed, int kv_head, uint32_t tag) {
  const auto& segs = ed.segments(kv_head);
  for (size_t i = 0; i < segs.size(); ++i)
    if (segs[i].tag == tag) return static_cast<int>(i);
  return -1;
}

// Rows [first, first + n) of the sequence-order concatenation (staged rows, then the new
// rows): k, v rows r at k + r * stride. `first` and `n` are multiples of G.
using Sink = std::function<Status(const float* k, const float* v, int64_t stride, int64_t first, int64_t n)>;

// Rows folded when `staged` rows are staged and n_new arrive.
inline int64_t fold_count(int64_t staged, int64_t n_new, int64_t keep, int G) {
  const int64_t total = staged + n_new;
  return total >= keep + G ? (total - keep) / G * G : 0;
}

// Stages n_new rows (k, v rows r at k + r * stride, head_dim floats each) in kv_head's
// segment tagged `tag` (created with `codec` for K and V when absent and rows remain) and
// folds as described above. Returns the number of rows handed to the sink.
inline Result<int64_t> stage(LayerEditor& ed, int kv_head, uint32_t tag, const Codec* codec, int64_t keep, int G,
                             const float* kn, const float* vn, int64_t stride, int64_t n_new, const Sink& sink) {
  const int d = ed.head_dim();
  int seg = find_segment(ed, kv_head, tag);
  const int64_t w = seg >= 0 ? ed.segments(kv_head)[seg].n_tokens : 0, total = w + n_new;
  const int64_t n_fold = fold_count(w, n_new, keep, G);
  if (n_fold == 0) {
    if (n_new == 0) return int64_t{0};
    if (seg < 0) seg = ed.add_segment(kv_head, codec, codec, tag, /*reread=*/true);
    VLKV_RETURN_IF_ERROR(ed.append(kv_head, seg, kn, vn, stride, n_new));
    return int64_t{0};
  }
  std::vector<float> wk(static_cast<size_t>(w + G) * d), wv(wk.size());  // staged rows + a group's fill
  if (w > 0) ed.read(kv_head, seg, 0, w, wk.data(), wv.data());
  // a) the staged rows plus the new rows completing their last group (<= n_fold).
  const int64_t a = std::min(n_fold, (w + G - 1) / G * G);
  for (int64_t t = w; t < a; ++t) {
    std::memcpy(&wk[t * d], kn + (t - w) * stride, sizeof(float) * d);
    std::memcpy(&wv[t * d], vn + (t - w) * stride, sizeof(float) * d);
  }
  if (a > 0) VLKV_RETURN_IF_ERROR(sink(wk.data(), wv.data(), d, 0, a));
  // b) the rest of the fold straight from the new rows (whole groups).
  if (n_fold > a) VLKV_RETURN_IF_ERROR(sink(kn + (a - w) * stride, vn + (a - w) * stride, stride, a, n_fold - a));
  // c) a fresh staging segment with rows [n_fold, total); the old one goes. (The sink
  // may have added or removed other segments: find the old one again.)
  seg = find_segment(ed, kv_head, tag);
  if (n_fold < total) {
    const int nw = ed.add_segment(kv_head, codec, codec, tag, /*reread=*/true);
    if (n_fold < w) VLKV_RETURN_IF_ERROR(ed.append(kv_head, nw, &wk[n_fold * d], &wv[n_fold * d], d, w - n_fold));
    const int64_t first_new = std::max<int64_t>(0, n_fold - w);
    if (first_new < n_new)
      VLKV_RETURN_IF_ERROR(ed.append(kv_head, nw, kn + first_new * stride, vn + first_new * stride, stride, n_new - first_new));
  }
  if (seg >= 0) ed.remove_segment(kv_head, seg);
  return n_fold;
}

// The whole store() of a method with one compressed segment per kv head (tag `compressed`,
// codecs k and v) behind a staging window (tag `window`, codec w; KIVI's residual, the int
// methods' tile staging): each head's new rows are staged, and whole groups of G beyond keep
// go to the compressed segment.
inline Status store_staged(const StoreInput& in, LayerEditor& ed, uint32_t compressed, const Codec* k, const Codec* v,
                           uint32_t window, const Codec* w, int64_t keep, int G) {
  const int n_kv = ed.n_kv_heads(), d = ed.head_dim();
  const int64_t stride = static_cast<int64_t>(n_kv) * d;  // rows of one head in in.k / in.v
  for (int h = 0; h < n_kv; ++h) {
    if (find_segment(ed, h, compressed) < 0) ed.add_segment(h, k, v, compressed);
    const Sink to_compressed = [&](const float* kr, const float* vr, int64_t rs, int64_t, int64_t n) {
      return ed.append(h, find_segment(ed, h, compressed), kr, vr, rs, n);
    };
    Result<int64_t> folded =
        stage(ed, h, window, w, keep, G, in.k + h * d, in.v + h * d, stride, in.n_new, to_compressed);
    if (!folded.is_ok()) return folded.status();
  }
  return Status::ok();
}

}  // namespace vlkv::window_fold
