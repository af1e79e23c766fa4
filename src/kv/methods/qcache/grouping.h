// Q Cache's per-sequence grouping (grouping=prefill): the adjacent-layer JSD table a
// sequence's prompt measures layer by layer, the grouping it freezes into, and the lazy
// layer lists of canonical specs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
