// Methods "qcache_gla" and "qcache_vla": Q Cache / Lazy Attention (AAAI-26). Layers are
// grouped into lazy blocks: a standard layer followed by lazy layers that reuse its
// queries and keys (see calibration.h for the groupings). Storage is delegated to an
// inner method (default f16; "qcache_vla+vidkv", "qcache_gla+kivi2:residual=64"), which
// is handed a LayerEditor view and never knows it is wrapped.
//  - GLA: a lazy layer stores no K at all (the view drops K streams); the decoder gives it
//    the base layer's q and k, so its attention probabilities are the base layer's, applied
//    to its own V. Its V segments mirror the base layer's one for one because the inner
//    method's segment structure is a function of the token count (and kinds) alone, the
//    same in every layer.
//  - VLA: every layer stores visual and text tokens apart (segment spaces 1 and 2, each
//    with its own inner-method state); a lazy layer's visual segments store no K (keys of
//    the base layer's visual segments), its text segments keep their own K. share=scores
//    (default, the paper's VLA): visual keys are scored with the base layer's queries, so
//    the visual scores are the base layer's, text keys with the layer's own; one softmax over
//    both, applied to the layer's own V (the cache keeps the base layer's q and k of the step). share=keys: visual
//    keys scored with the layer's own queries (shared keys, own query; a variant).
//
// Grouping (first match): lazy=L1.L2... explicit; map=FILE (vlkv calibrate; with n_lazy=K
// or threshold=T regrouped from the map's JSD table); grouping=random (n_lazy layers at
// random, the paper's sanity baseline, K defaulting to the map's or the pattern's count);
// grouping=pattern (calibration.h: pattern_grouping - none lazy below 5 layers); else
// (the default without a map) grouping=prefill: each sequence is grouped on the fly from
// its own prompt. While a sequence sees only multi-token (prefill) steps every layer is
// standard and asks attend() for the maps of `probes` evenly spaced queries per step
// (kStatProbeMaps); each layer's store compares them with the layer before's (JSD per
// query and head, whole maps for GLA, visual keys for VLA when there are any, as vlkv
// calibrate does) and sums the table in the sequence state. The first 1-token step
// freezes the grouping (threshold=T, else the n_lazy smallest JSDs, default the pattern's
// count) and lazy layers drop the K they stored during the prompt (before_attention), so
// the prompt runs at full precision and the saving starts with decoding. Later steps of
// any size use the frozen grouping. Key orders match across layers because the inner
// method's segment structure depends only on token counts and kinds.
//
// Accounting: a lazy layer holds the inner method's V bytes only. K and V bytes of one
// (layer, kv head) are measured by running the inner method on a scratch pool (exact for
// any inner method); bytes_per_token() and bits_per_element() are over all layers (bits
// relative to a full K+V cache of every layer), assuming visual tokens for VLA (its text
// tokens keep K in lazy layers too: what a sequence really holds is KvCache::stored_bytes,
// which vlkv eval reports as measured). grouping=prefill: bytes_for_tokens() is the upper
// bound (every layer's K, as during the prompt), min_bytes_for_tokens() the bound with the
// most lazy layers the grouping may choose; bytes_per_token() assumes n_lazy lazy layers
// (with threshold=T: none, the worst case).
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "kv/method_registry.h"
#include "kv/methods/qcache/calibration.h"
#include "kv/methods/qcache/grouping.h"
#include "kv/methods/qcache/inner.h"

namespace vlkv {
namespace {

using qcache::decide_grouping;
using qcache::HeadBytes;
using qcache::kSpaceText;
using qcache::kSpaceVisual;
using qcache::layer_list;
using qcache::PartitionState;
using qcache::PrefillGroupingState;
using qcache::simulate_head_bytes;

enum class Mode { kGla, kVla };

class QcacheMethod final : public Method, public SequencePolicy {
 public:
  static Result<std::unique_ptr<Method>> create(Mode mode, const Spec& spec, const KvGeometry& geo,
                                                std::unique_ptr<Method> inner) {
    const std::string name = mode == Mode::kGla ? "qcache_gla" : "qcache_vla";
    for (int l = 0; l < geo.n_layers; ++l) {
      const LayerPlan p = inner->layer_plan(l);
      if (!p.stores_k || p.score_layer >= 0 || p.stats != kStatNone)
        return unsupported("'" + name + "' cannot wrap '" + inner->spec() +
                           "' (it needs attention statistics or shares layers itself)");
    }
    const std::string share = spec.get_string("share", "scores");
    if (share != "keys" && share != "scores")
      return invalid_argument("'" + name + "': share=" + share + " is not supported; valid: scores, keys");
    const std::string grouping = spec.get_string("grouping", "auto");
    if (grouping != "auto" && grouping != "pattern" && grouping != "random" && grouping != "map" && grouping != "prefill")
      return invalid_argument("'" + name + "': grouping=" + grouping +
                              " is not supported; valid: auto, prefill, pattern, map, random");
    VLKV_ASSIGN_OR_RETURN(int64_t probes, spec.get_int("probes", 16, 1, 4096));
    const std::string map_path = spec.get_string("map", "");
    if (grouping == "map" && map_path.empty()) return invalid_argument("'" + name + "': grouping=map needs map=FILE");
    VLKV_ASSIGN_OR_RETURN(int64_t n_lazy, spec.get_int("n_lazy", -1, 0, 1 << 20));
    VLKV_ASSIGN_OR_RETURN(double threshold, spec.get_double("threshold", -1.0, 0.0, 1.0));
    VLKV_ASSIGN_OR_RETURN(int64_t seed, spec.get_int("seed", 0, 0, int64_t{1} << 62));
    if (spec.has("n_lazy") && spec.has("threshold"))
      return invalid_argument("'" + name + "': give n_lazy or threshold, not both");

    calibration::Grouping g;
    std::optional<calibration::CalibrationMap> map;
    if (!map_path.empty()) {
      Result<calibration::CalibrationMap> m = calibration::load_map(map_path, geo);
      if (!m.is_ok()) return invalid_argument("'" + name + "': " + m.status().message());
      map = std::move(m).value();
    }
    // auto: a map if given; explicit lazy layers are a fixed grouping; else the prompt's.
    const std::string used = grouping != "auto" ? grouping : map ? "map" : spec.has("lazy") ? "pattern" : "prefill";
    if (spec.has("threshold") && used != "map" && used != "prefill")
      return invalid_argument("'" + name + "': threshold needs map=FILE or grouping=prefill (the JSD table it cuts)");
    if (spec.has("probes") && used != "prefill")
      return invalid_argument("'" + name + "': probes is a parameter of grouping=prefill");
    if (spec.has("lazy") && used == "prefill")
      return invalid_argument("'" + name + "': lazy=... fixes the grouping: use it with grouping=pattern (or a map), "
                              "not grouping=prefill");
    if (used == "prefill" && map)
      return invalid_argument("'" + name + "': grouping=prefill measures the prompt: it takes no map");
    int prefill_n_lazy = -1;
    if (used == "prefill") {
      // Nothing is lazy until a sequence's prompt is measured; the count that will be.
      g.base.assign(static_cast<size_t>(geo.n_layers), -1);
      if (n_lazy > geo.n_layers - 1)
        return invalid_argument("'" + name + "': n_lazy=" + std::to_string(n_lazy) + " but the model has only " +
                                std::to_string(geo.n_layers - 1) + " layers that can be lazy (layer 0 never is)");
      if (threshold < 0)
        prefill_n_lazy = n_lazy >= 0 ? static_cast<int>(n_lazy) : calibration::pattern_grouping(geo.n_layers).n_lazy();
      n_lazy = -1;  // checked against the frozen grouping, not here
    } else if (used == "random") {
      const int k = n_lazy >= 0 ? static_cast<int>(n_lazy)
                    : map ? map->grouping.n_lazy()
                          : calibration::pattern_grouping(geo.n_layers).n_lazy();
      g = calibration::random_grouping(geo.n_layers, k, static_cast<uint64_t>(seed));
      n_lazy = k;
    } else if (used == "map") {
      if (n_lazy >= 0) g = calibration::group_by_count(map->criterion_jsd(), static_cast<int>(n_lazy));
      else if (threshold >= 0) g = calibration::group_by_threshold(map->criterion_jsd(), threshold);
      else g = map->grouping;
    } else {
      g = calibration::pattern_grouping(geo.n_layers);
      if (spec.has("n_lazy")) return invalid_argument("'" + name + "': n_lazy needs map=FILE, grouping=prefill or grouping=random");
    }
    if (spec.has("lazy")) {  // explicit layers win (canonical specs carry them)
      VLKV_ASSIGN_OR_RETURN(std::vector<int> lazy, qcache::parse_layer_list(name, spec.get_string("lazy", "")));
      Result<calibration::Grouping> eg = calibration::grouping_from_lazy(geo.n_layers, lazy);
      if (!eg.is_ok()) return invalid_argument("'" + name + "': " + eg.status().message());
      g = *eg;
    }
    if (n_lazy >= 0 && g.n_lazy() != n_lazy)
      return invalid_argument("'" + name + "': n_lazy=" + std::to_string(n_lazy) + " but the grouping has " +
                              std::to_string(g.n_lazy()) + " lazy layers (at most n_layers - 1 = " +
                              std::to_string(geo.n_layers - 1) + ")");

    auto m = std::unique_ptr<QcacheMethod>(new QcacheMethod());
    m->mode_ = mode;
    m->base_scores_ = share == "scores";
    m->geo_ = geo;
    m->base_ = g.base;
    m->n_lazy_ = g.n_lazy();
    m->prefill_ = used == "prefill";
    m->prefill_n_lazy_ = prefill_n_lazy;
    m->threshold_ = threshold;
    m->probes_ = static_cast<int>(probes);
    std::string text = name + (mode == Mode::kVla ? ":share=" + share + "," : ":") + "grouping=" + used;
    if (!map_path.empty()) text += ",map=" + map_path;
    if (used == "random") text += ",seed=" + std::to_string(seed);
    if (spec.has("threshold")) text += ",threshold=" + spec.get_string("threshold", "");
    if (m->prefill_) {
      text += ",probes=" + std::to_string(probes);
      if (prefill_n_lazy >= 0) text += ",n_lazy=" + std::to_string(prefill_n_lazy);
    } else {
      text += ",n_lazy=" + std::to_string(m->n_lazy_) + ",lazy=" + layer_list(g.lazy_layers());
    }
    m->spec_ = text + "+" + inner->spec();
    // K and V bytes per (layer, head): steady-state slopes between two lengths that every
    // group size up to 4096 divides.
    const HeadBytes a = simulate_head_bytes(*inner, geo.head_dim, 4096), b = simulate_head_bytes(*inner, geo.head_dim, 8192);
    const double k_slope = (b.k - a.k) / 4096.0, v_slope = (b.v - a.v) / 4096.0;
    m->k_share_ = k_slope + v_slope > 0 ? k_slope / (k_slope + v_slope) : 0.5;
    if (m->prefill_) m->n_lazy_ = std::max(prefill_n_lazy, 0);  // the steady state it reports (threshold: none)
    m->inner_ = std::move(inner);
    return std::unique_ptr<Method>(std::move(m));
  }

  const std::string& spec() const override { return spec_; }

  // grouping=prefill: every layer standard (a sequence's grouping is its own: step_plan).
  LayerPlan layer_plan(int layer) const override { return plan_for(base_[layer]); }

  const SequencePolicy* sequence_policy() const override { return this; }
  std::unique_ptr<LayerState> new_sequence_state() const override {
    if (!prefill_) return nullptr;
    auto s = std::make_unique<PrefillGroupingState>();
    const size_t n_adj = static_cast<size_t>(std::max(0, geo_.n_layers - 1));
    s->sum_whole.assign(n_adj, 0.0);
    s->sum_visual.assign(n_adj, 0.0);
    s->cnt_whole.assign(n_adj, 0);
    s->cnt_visual.assign(n_adj, 0);
    return s;
  }

  bool shares_keys_across_layers() const override { return true; }
  LayerPlan step_plan(int layer, const LayerState* sequence_state, int n_new) const override {
    if (!prefill_ || !sequence_state) return layer_plan(layer);
    const auto& st = static_cast<const PrefillGroupingState&>(*sequence_state);
    if (st.frozen) return plan_for(st.base[layer]);
    if (n_new == 1 && st.measured()) return plan_for(decide(st).base[layer]);  // this step freezes it
    LayerPlan p;
    if (n_new > 1 && prefill_n_lazy_ != 0) {  // the prompt: measure (unless nothing can become lazy)
      p.stats = kStatProbeMaps;
      p.stats_in_decode = false;
      p.probe.evenly = probes_;
    }
    return p;
  }

  Status before_attention(const StoreInput& in, LayerEditor& ed) const override {
    if (!prefill_ || !ed.sequence_state()) return Status::ok();
    auto& st = static_cast<PrefillGroupingState&>(*ed.sequence_state());
    if (!st.frozen && in.n_new == 1 && st.measured()) {
      st.base = decide(st).base;
      st.frozen = true;
    }
    if (!st.frozen || st.base[in.layer] < 0) return Status::ok();
    // A layer that became lazy drops the K its prompt stored (GLA: all; VLA: visual tokens').
    LayerEditor view = ed.view(mode_ == Mode::kGla ? 0 : kSpaceVisual, true, nullptr);
    for (int h = 0; h < view.n_kv_heads(); ++h)
      for (size_t i = 0; i < view.segments(h).size(); ++i) view.remove_k(h, static_cast<int>(i));
    return Status::ok();
  }

  std::vector<const Codec*> codecs() const override { return inner_->codecs(); }
  bool uses_visual_similarity() const override { return inner_->uses_visual_similarity(); }
  std::string describe_sequence(const LayerState* sequence_state) const override {
    if (!prefill_) return "lazy layers " + layer_list(calibration::Grouping{base_}.lazy_layers());
    if (prefill_n_lazy_ == 0) return "no lazy layers (n_lazy=0: pass n_lazy=K or threshold=T)";
    const auto* st = static_cast<const PrefillGroupingState*>(sequence_state);
    if (!st || !st->frozen) return "lazy layers not chosen yet (from the prompt, at the first decoded token)";
    return "lazy layers " + layer_list(calibration::Grouping{st->base}.lazy_layers()) + " (chosen from the prompt)";
  }
  std::string without_visual_tokens() const override {
    std::string note = mode_ == Mode::kVla ? "its lazy layers share only visual tokens' keys; without visual tokens "
                                             "every layer keeps its own (no saving)"
                                           : "";
    const std::string inner = inner_->without_visual_tokens();
    if (!inner.empty() && !note.empty()) note += "; ";  // appended piecewise: GCC 12's false -Wrestrict
    note += inner;
    return note;
  }

  std::unique_ptr<LayerState> new_layer_state(int layer) const override {
    if (mode_ == Mode::kGla) return inner_->new_layer_state(layer);
    auto s = std::make_unique<PartitionState>();
    for (auto& p : s->inner) p = inner_->new_layer_state(layer);
    return s;
  }

  Status store(const StoreInput& in, LayerEditor& ed) const override {
    bool lazy = base_[in.layer] >= 0;
    if (prefill_ && ed.sequence_state()) {
      auto& st = static_cast<PrefillGroupingState&>(*ed.sequence_state());
      if (in.stats && in.stats->probe_maps) measure_maps(in, ed, mode_ == Mode::kVla, geo_.n_layers, st);
      lazy = st.frozen && st.base[in.layer] >= 0;
    }
    if (mode_ == Mode::kGla) {
      LayerEditor view = ed.view(0, !lazy, nullptr);
      return inner_->store(in, view);
    }
    auto* st = static_cast<PartitionState*>(ed.state());
    const int64_t row = static_cast<int64_t>(ed.n_kv_heads()) * ed.head_dim();  // floats per token in in.k / in.v
    for (int p = 0; p < 2; ++p) {
      const bool visual = p == 0;
      std::vector<int> idx;
      for (int i = 0; i < in.n_new; ++i)
        if ((in.kinds[i] == TokenKind::kVisual) == visual) idx.push_back(i);
      if (idx.empty()) continue;
      StoreInput sub = in;
      sub.stats = nullptr;
      sub.n_cached = st->n_cached[p];
      sub.n_new = static_cast<int>(idx.size());
      std::vector<float> k, v, sim;
      std::vector<TokenKind> kinds;
      if (sub.n_new != in.n_new) {  // gather this space's tokens (sequence order kept)
        k.resize(idx.size() * row);
        v.resize(k.size());
        for (size_t j = 0; j < idx.size(); ++j) {
          std::copy_n(in.k + idx[j] * row, row, k.data() + j * row);
          std::copy_n(in.v + idx[j] * row, row, v.data() + j * row);
          kinds.push_back(in.kinds[idx[j]]);
          if (in.visual_similarity) sim.push_back(in.visual_similarity[idx[j]]);
        }
        sub.k = k.data();
        sub.v = v.data();
        sub.kinds = kinds.data();
        sub.visual_similarity = in.visual_similarity ? sim.data() : nullptr;
      }
      LayerEditor view = ed.view(visual ? kSpaceVisual : kSpaceText, !(lazy && visual), st->inner[p].get());
      VLKV_RETURN_IF_ERROR(inner_->store(sub, view));
      st->n_cached[p] += sub.n_new;
    }
    return Status::ok();
  }

  double bytes_per_token() const override {
    return inner_->bytes_per_token() * (1.0 - k_share_ * n_lazy_ / static_cast<double>(geo_.n_layers));
  }
  double bits_per_element() const override {
    return bytes_per_token() * 8.0 / (2.0 * geo_.n_layers * geo_.n_kv_heads * geo_.head_dim);
  }
  double bytes_for_tokens(int64_t n) const override {
    const double full = inner_->bytes_for_tokens(n);
    if (n_lazy_ == 0 || prefill_) return full;
    return full - static_cast<double>(n_lazy_) * geo_.n_kv_heads * simulate_head_bytes(*inner_, geo_.head_dim, n).k;
  }
  double min_bytes_for_tokens(int64_t n) const override {
    if (!prefill_) return bytes_for_tokens(n);
    const int most = prefill_n_lazy_ >= 0 ? prefill_n_lazy_ : geo_.n_layers - 1;
    return inner_->bytes_for_tokens(n) -
           static_cast<double>(most) * geo_.n_kv_heads * simulate_head_bytes(*inner_, geo_.head_dim, n).k;
  }
  int max_streams_per_head() const override { return (mode_ == Mode::kVla ? 2 : 1) * inner_->max_streams_per_head(); }
  double error_bound() const override { return inner_->error_bound(); }
  double rms_error_bound() const override { return inner_->rms_error_bound(); }
  int error_block_tokens() const override { return inner_->error_block_tokens(); }

 private:
  calibration::Grouping decide(const PrefillGroupingState& st) const {
    return decide_grouping(st, mode_ == Mode::kVla, threshold_, prefill_n_lazy_);
  }
  LayerPlan plan_for(int base) const {
    LayerPlan p;
    if (base < 0) return p;
    p.score_layer = base;
    if (mode_ == Mode::kGla) p.stores_k = false;
    else {
      p.visual_only = true;
      p.base_scores = base_scores_;
    }
    return p;
  }

  Mode mode_ = Mode::kGla;
  bool base_scores_ = true;  // VLA share=scores: visual keys scored with the base layer's queries
  KvGeometry geo_;
  std::string spec_;
  std::unique_ptr<Method> inner_;
  std::vector<int> base_;  // [n_layers] -1 standard, else the layer whose q and k a lazy layer reuses
  int n_lazy_ = 0;
  double k_share_ = 0.5;  // K's share of the inner method's steady-state bytes
  bool prefill_ = false;     // grouping=prefill: per sequence, from its prompt
  int prefill_n_lazy_ = -1;  // its lazy count (-1: by threshold_)
  double threshold_ = -1;
  int probes_ = 16;
};

std::vector<ParamInfo> qcache_params(Mode mode) {
  std::vector<ParamInfo> p = {
      {"grouping", "auto", "lazy blocks: auto (map if given, else prefill), prefill (per sequence from its prompt's "
                           "attention maps: full precision for the prompt, lazy layers from the first decoded token), "
                           "pattern (layers 3, 5, 7, ... up to n_layers-2 lazy), map, random (n_lazy layers at random: "
                           "the paper's sanity baseline)"},
      {"map", "", "calibration map from vlkv calibrate (JSON; must match the model)"},
      {"n_lazy", "-1", "number of lazy layers: regroups the map by its JSD table, the prefill count (default: as "
                       "pattern), or the random count"},
      {"threshold", "-1", "with map or prefill: layers whose JSD to the layer before is below this are lazy"},
      {"probes", "16", "grouping=prefill: queries per prompt step whose attention maps are compared"},
      {"seed", "0", "seed of grouping=random"},
      {"lazy", "", "explicit '.'-separated lazy layers (e.g. 3.5.6) or none; overrides the grouping"},
  };
  if (mode == Mode::kVla)
    p.insert(p.begin(), {"share", "scores", "scores: lazy layers reuse the base layer's scores of visual tokens "
                                            "(base q . base k, the paper's VLA); keys: the base layer's visual keys "
                                            "with the layer's own queries"});
  return p;
}

MethodInfo qcache_info(Mode mode) {
  const bool gla = mode == Mode::kGla;
  MethodInfo info;
  info.name = gla ? "qcache_gla" : "qcache_vla";
  info.help = gla ? "Q Cache global lazy attention: lazy layers reuse a base layer's q and k (no K stored); "
                    "wraps a storage method: qcache_gla+kivi2 (default f16)"
                  : "Q Cache visual lazy attention: lazy layers reuse a base layer's keys of visual tokens (no "
                    "visual K stored); wraps a storage method: qcache_vla+vidkv (default f16)";
  info.params = qcache_params(mode);
  info.create = [mode](const Spec& s, const KvGeometry& g) -> Result<std::unique_ptr<Method>> {
    VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Method> inner, create_method("f16", g));
    return QcacheMethod::create(mode, s, g, std::move(inner));
  };
  info.wrap = [mode](const Spec& s, const KvGeometry& g, std::unique_ptr<Method> inner) {
    return QcacheMethod::create(mode, s, g, std::move(inner));
  };
  return info;
}

}  // namespace

VLKV_REGISTER_KV_METHOD(qcache_gla, qcache_info(Mode::kGla));
VLKV_REGISTER_KV_METHOD(qcache_vla, qcache_info(Mode::kVla));

}  // namespace vlkv
