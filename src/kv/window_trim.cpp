#include "kv/window_trim.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "kv/method.h"

namespace vlkv {
namespace {

// Frees the stream's full pages whose tokens (rounded out to `unit`) are all at positions
// <= limit. pos: [head's stored tokens] storage index -> position, or null (in order).
void trim_stream(LayerEditor& ed, int h, int seg_index, bool k_stream, const Segment& seg, int64_t seg_first,
                 int64_t unit, const int64_t* pos, int64_t limit) {
  const Stream& s = k_stream ? seg.k : seg.v;
  const int64_t tpp = s.tokens_per_page();
  const int64_t n_full = seg.n_tokens / tpp;  // pages no later append writes into
  // In sequence order the freed pages are a prefix: start after it, stop at the first page kept.
  for (int64_t p = pos ? 0 : s.n_freed_pages; p < n_full; ++p) {
    if (s.pages[static_cast<size_t>(p)] == kNoPage) continue;
    const int64_t a = p * tpp / unit * unit;
    const int64_t b = std::min(seg.n_tokens, ((p + 1) * tpp + unit - 1) / unit * unit);
    const int64_t newest = pos ? *std::max_element(pos + seg_first + a, pos + seg_first + b) : seg_first + b - 1;
    if (newest <= limit) {
      ed.free_page(h, seg_index, k_stream, static_cast<size_t>(p));
    } else if (!pos) {
      break;
    }
  }
}

}  // namespace

void free_out_of_window(LayerEditor& ed, const Method& method, int64_t next_pos, int64_t v_window, int64_t k_window) {
  if (v_window <= 0 && k_window <= 0) return;
  std::vector<int64_t> positions;
  for (int h = 0; h < ed.n_kv_heads(); ++h) {
    const std::vector<Segment>& segs = ed.all_segments(h);
    const bool out_of_order = method.stored_positions(ed.state(), h, segs, &positions);
    const int64_t* pos = out_of_order ? positions.data() : nullptr;
    int64_t first = 0;  // storage index of the segment's first token
    for (size_t i = 0; i < segs.size(); ++i) {
      const Segment& seg = segs[i];
      if (!seg.reread && seg.n_tokens > 0) {
        const int64_t unit = std::lcm<int64_t>(seg.k.present() ? seg.k.codec->tokens_per_block() : 1,
                                               seg.v.codec->tokens_per_block());
        if (seg.k.present() && k_window > 0)
          trim_stream(ed, h, static_cast<int>(i), true, seg, first, unit, pos, next_pos - k_window);
        if (v_window > 0) trim_stream(ed, h, static_cast<int>(i), false, seg, first, unit, pos, next_pos - v_window);
      }
      first += seg.n_tokens;
    }
  }
}

}  // namespace vlkv
