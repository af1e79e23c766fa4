#include "kv/methods/qcache/grouping.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace vlkv::qcache {

// The grouping a sequence's measured JSD table gives (VLA: the visual table where the
// prompt had visual keys). Layers never measured are never lazy.
calibration::Grouping decide_grouping(const PrefillGroupingState& st, bool vla, double threshold, int n_lazy) {
  const bool visual = vla &&
                      std::any_of(st.cnt_visual.begin(), st.cnt_visual.end(), [](int64_t c) { return c > 0; });
  const std::vector<double>& sum = visual ? st.sum_visual : st.sum_whole;
  const std::vector<int64_t>& cnt = visual ? st.cnt_visual : st.cnt_whole;
  std::vector<double> jsd(sum.size());
  int n_measured = 0;
  for (size_t i = 0; i < jsd.size(); ++i) {
    jsd[i] = cnt[i] > 0 ? sum[i] / static_cast<double>(cnt[i]) : std::numeric_limits<double>::infinity();
    n_measured += cnt[i] > 0;
  }
  if (threshold >= 0) return calibration::group_by_threshold(jsd, threshold);
  return calibration::group_by_count(jsd, std::min(n_lazy, n_measured));
}

// One layer's probe maps of a prompt step against the layer before's (same step, same
// probes and key order): JSD per probe and query head into the sequence's table.
void measure_maps(const StoreInput& in, const LayerEditor& ed, bool vla, int n_layers, PrefillGroupingState& st) {
  const AttentionStats& s = *in.stats;
  const int64_t n_keys = in.n_cached + in.n_new;
  const int n_heads = s.n_heads, group = n_heads / ed.n_kv_heads();
  const size_t size = static_cast<size_t>(s.n_probes) * n_heads * n_keys;
  if (in.layer > 0 && st.prev_layer == in.layer - 1 && st.prev_keys == n_keys && st.prev_maps.size() == size) {
    std::vector<std::vector<TokenKind>> kinds(ed.n_kv_heads());  // per kv head, step key order
    bool any_visual = false;
    for (int h = 0; h < ed.n_kv_heads(); ++h) {
      const SegmentList segs = ed.segments(h);
      for (size_t i = 0; i < segs.size(); ++i)  // VLA's visual space holds visual tokens only
        kinds[h].insert(kinds[h].end(), segs[i].n_tokens,
                        segs[i].space == kSpaceVisual ? TokenKind::kVisual : TokenKind::kText);
      for (int j = 0; j < in.n_new; ++j) kinds[h].push_back(in.kinds[j]);
      any_visual = any_visual || std::count(kinds[h].begin(), kinds[h].end(), TokenKind::kVisual) > 0;
    }
    const size_t adj = static_cast<size_t>(in.layer - 1);
    for (int p = 0; p < s.n_probes; ++p) {
      const int64_t seen = in.n_cached + s.probes[p] + 1;  // keys the probe sees (a prefix in key order)
      double whole = 0, visual = 0;
      int n_visual = 0;
      for (int h = 0; h < n_heads; ++h) {
        const size_t row = (static_cast<size_t>(p) * n_heads + h) * n_keys;
        const calibration::MapJsd j = calibration::compare_maps(
            st.prev_maps.data() + row, s.probe_maps + row, seen,
            vla && any_visual ? kinds[h / group].data() : nullptr);
        whole += j.whole;
        if (j.visual >= 0) {
          visual += j.visual;
          ++n_visual;
        }
      }
      st.sum_whole[adj] += whole / n_heads;
      ++st.cnt_whole[adj];
      if (n_visual > 0) {
        st.sum_visual[adj] += visual / n_visual;
        ++st.cnt_visual[adj];
      }
    }
  }
  if (in.layer + 1 < n_layers) {
    st.prev_maps.assign(s.probe_maps, s.probe_maps + size);
    st.prev_layer = in.layer;
    st.prev_keys = n_keys;
  } else {  // the step's last layer: nothing compares with it; keep snapshots small
    st.prev_maps.clear();
    st.prev_maps.shrink_to_fit();
    st.prev_layer = -1;
  }
}

Result<std::vector<int>> parse_layer_list(const std::string& name, const std::string& text) {
  std::vector<int> out;
  if (text == "none") return out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, '.')) {
    char* end = nullptr;
    const long x = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || x < 0 || x > (1 << 20))
      return invalid_argument("'" + name + "': lazy=" + text + " is not a '.'-separated list of layer indices (or none)");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

std::string layer_list(const std::vector<int>& layers) {
  if (layers.empty()) return "none";
  std::string out;
  for (int l : layers) {  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&
    if (!out.empty()) out += '.';
    out += std::to_string(l);
  }
  return out;
}

}  // namespace vlkv::qcache
