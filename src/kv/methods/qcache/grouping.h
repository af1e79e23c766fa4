// Q Cache's per-sequence grouping (grouping=prefill): the adjacent-layer JSD table a
// sequence's prompt measures layer by layer, the grouping it freezes into, and the lazy
// layer lists of canonical specs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_bytes.h"
#include "kv/method.h"
#include "kv/methods/qcache/calibration.h"

namespace vlkv::qcache {

// Segment spaces of qcache_vla: visual and text tokens stored apart (LayerEditor::view).
constexpr uint32_t kSpaceVisual = 1, kSpaceText = 2;

// grouping=prefill: the adjacent-layer JSD table of one sequence's prompt, the previous
// layer's probe maps of the current step, and the grouping once frozen.
class PrefillGroupingState final : public LayerState {
 public:
  std::unique_ptr<LayerState> clone() const override { return std::make_unique<PrefillGroupingState>(*this); }
  bool save(ByteWriter& w) const override {
    w.put<uint8_t>(frozen ? 1 : 0);
    w.vec(base);
    w.vec(sum_whole);
    w.vec(sum_visual);
    w.vec(cnt_whole);
    w.vec(cnt_visual);
    w.vec(prev_maps);
    w.put<int32_t>(prev_layer);
    w.put<int64_t>(prev_keys);
    return true;
  }
  // Into a fresh state (its tables sized n_layers - 1): the same sizes, a frozen grouping of
  // one entry per layer each -1 or an earlier layer. prev_maps is used only where its size
  // matches the step (measure_maps).
  bool load(ByteReader& r, const LayerCache*) override {
    const size_t n_adj = sum_whole.size();
    const uint8_t f = r.get<uint8_t>();
    base = r.vec<int>(n_adj + 1);
    sum_whole = r.vec<double>(n_adj);
    sum_visual = r.vec<double>(n_adj);
    cnt_whole = r.vec<int64_t>(n_adj);
    cnt_visual = r.vec<int64_t>(n_adj);
    prev_maps = r.vec<float>();
    prev_layer = r.get<int32_t>();
    prev_keys = r.get<int64_t>();
    if (!r.ok() || f > 1 || sum_whole.size() != n_adj || sum_visual.size() != n_adj || cnt_whole.size() != n_adj ||
        cnt_visual.size() != n_adj)
      return false;
    frozen = f == 1;
    if (base.size() != (frozen ? n_adj + 1 : 0)) return false;
    for (size_t l = 0; l < base.size(); ++l)
      if (base[l] < -1 || base[l] >= static_cast<int>(l)) return false;
    return true;
  }
  bool frozen = false;
  std::vector<int> base;                            // frozen grouping ([n_layers], -1 standard)
  std::vector<double> sum_whole, sum_visual;        // [n_layers - 1] JSD sums of layers (l, l + 1)
  std::vector<int64_t> cnt_whole, cnt_visual;       // [n_layers - 1]
  std::vector<float> prev_maps;                     // [n_probes, n_heads, n_keys] of layer prev_layer, this step
  int prev_layer = -1;
  int64_t prev_keys = 0;
  bool measured() const {
    return std::any_of(cnt_whole.begin(), cnt_whole.end(), [](int64_t c) { return c > 0; });
  }
};

// The grouping a sequence's measured JSD table gives (vla: the visual table where the prompt
// had visual keys): below threshold (>= 0), else the n_lazy smallest. Layers never measured
// are never lazy.
calibration::Grouping decide_grouping(const PrefillGroupingState& st, bool vla, double threshold, int n_lazy);

// One layer's probe maps of a prompt step (in.stats) against the layer before's (same step,
// same probes and key order): JSD per probe and query head into the sequence's table.
void measure_maps(const StoreInput& in, const LayerEditor& ed, bool vla, int n_layers, PrefillGroupingState& st);

// lazy=L1.L2... (or none) of a spec named `name`.
Result<std::vector<int>> parse_layer_list(const std::string& name, const std::string& text);
// The same list as text ("none" when empty).
std::string layer_list(const std::vector<int>& layers);

}  // namespace vlkv::qcache
