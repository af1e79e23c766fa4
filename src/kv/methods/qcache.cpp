// Methods "qcache_gla" and "qcache_vla": Q Cache / Lazy Attention (AAAI-26). Layers are
// grouped into lazy blocks: a standard layer followed by lazy layers that reuse its
// queries and keys (see kv/calibration.h for the groupings). Storage is delegated to an
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
//    both, applied to the layer's own V (attend()'s base_q / base_k). share=keys: visual
//    keys scored with the layer's own queries (shared keys, own query; a variant).
//
// Grouping (first match): lazy=L1.L2... explicit; map=FILE (vlkv calibrate; with n_lazy=K
// or threshold=T regrouped from the map's JSD table); grouping=random (n_lazy layers at
// random, the paper's sanity baseline, K defaulting to the map's or the pattern's count);
// else the fallback pattern (calibration.h: pattern_grouping - none lazy below 5 layers).
//
// Accounting: a lazy layer holds the inner method's V bytes only. K and V bytes of one
// (layer, kv head) are measured by running the inner method on a scratch pool (exact for
// any inner method); bytes_per_token() and bits_per_element() are over all layers (bits
// relative to a full K+V cache of every layer), assuming visual tokens for VLA (its text
// tokens keep K in lazy layers too).
#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "kv/calibration.h"
#include "kv/method_registry.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"

namespace vlkv {
namespace {

enum class Mode { kGla, kVla };
constexpr uint32_t kSpaceVisual = 1, kSpaceText = 2;

// VLA: the inner method's state and token count per space (0 visual, 1 text).
class PartitionState final : public LayerState {
 public:
  std::unique_ptr<LayerState> clone() const override {
    auto c = std::make_unique<PartitionState>();
    for (int p = 0; p < 2; ++p) {
      if (inner[p]) c->inner[p] = inner[p]->clone();
      c->n_cached[p] = n_cached[p];
    }
    return c;
  }
  std::unique_ptr<LayerState> inner[2];
  int64_t n_cached[2] = {0, 0};
};

// Bytes of codec blocks (K and V) one (layer, kv head) holds after `inner` stored n tokens
// (one step, visual kinds, zero data): runs the method on a scratch pool.
struct HeadBytes {
  double k = 0, v = 0;
};
HeadBytes simulate_head_bytes(const Method& inner, int head_dim, int64_t n) {
  HeadBytes out;
  if (n <= 0) return out;
  const uint64_t budget = std::max<uint64_t>(64ull << 20, static_cast<uint64_t>(n) * head_dim * 16 + (16ull << 20));
  PagePool pool(budget, 64 * 1024);
  LayerCache layer;
  layer.heads.resize(1);
  layer.state = inner.new_layer_state(0);
  PendingStep pending;
  pending.n_new = static_cast<int>(n);
  LayerEditor ed(pool, layer, pending, 0, head_dim);
  std::vector<float> zeros(static_cast<size_t>(n) * head_dim, 0.0f);
  std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kVisual);
  StoreInput in;
  in.n_new = static_cast<int>(n);
  in.k = zeros.data();
  in.v = zeros.data();
  in.kinds = kinds.data();
  if (!inner.store(in, ed).is_ok()) return out;  // a scratch pool this size does not run out
  for (const Segment& s : layer.heads[0].segments) {
    if (s.k.present()) out.k += static_cast<double>(s.k.block_bytes) * (s.n_tokens / s.k.codec->tokens_per_block());
    out.v += static_cast<double>(s.v.block_bytes) * (s.n_tokens / s.v.codec->tokens_per_block());
  }
  for (PageId p : pending.new_pages) pool.free(p);
  return out;
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

class QcacheMethod final : public Method {
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
    if (grouping != "auto" && grouping != "pattern" && grouping != "random" && grouping != "map")
      return invalid_argument("'" + name + "': grouping=" + grouping + " is not supported; valid: auto, pattern, map, random");
    const std::string map_path = spec.get_string("map", "");
    if (grouping == "map" && map_path.empty()) return invalid_argument("'" + name + "': grouping=map needs map=FILE");
    VLKV_ASSIGN_OR_RETURN(int64_t n_lazy, spec.get_int("n_lazy", -1, 0, 1 << 20));
    VLKV_ASSIGN_OR_RETURN(double threshold, spec.get_double("threshold", -1.0, 0.0, 1.0));
    VLKV_ASSIGN_OR_RETURN(int64_t seed, spec.get_int("seed", 0, 0, int64_t{1} << 62));
    if (spec.has("n_lazy") && spec.has("threshold"))
      return invalid_argument("'" + name + "': give n_lazy or threshold, not both");
    if (spec.has("threshold") && map_path.empty())
      return invalid_argument("'" + name + "': threshold needs map=FILE (the JSD table it cuts)");

    calibration::Grouping g;
    std::optional<calibration::CalibrationMap> map;
    if (!map_path.empty()) {
      Result<calibration::CalibrationMap> m = calibration::load_map(map_path, geo);
      if (!m.is_ok()) return invalid_argument("'" + name + "': " + m.status().message());
      map = std::move(m).value();
    }
    const std::string used = grouping == "auto" ? (map ? "map" : "pattern") : grouping;
    if (used == "random") {
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
      if (spec.has("n_lazy")) return invalid_argument("'" + name + "': n_lazy needs map=FILE or grouping=random");
    }
    if (spec.has("lazy")) {  // explicit layers win (canonical specs carry them)
      VLKV_ASSIGN_OR_RETURN(std::vector<int> lazy, parse_layer_list(name, spec.get_string("lazy", "")));
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
    std::string text = name + (mode == Mode::kVla ? ":share=" + share + "," : ":") + "grouping=" + used;
    if (!map_path.empty()) text += ",map=" + map_path;
    if (used == "random") text += ",seed=" + std::to_string(seed);
    if (spec.has("threshold")) text += ",threshold=" + spec.get_string("threshold", "");
    text += ",n_lazy=" + std::to_string(m->n_lazy_) + ",lazy=" + layer_list(g.lazy_layers());
    m->spec_ = text + "+" + inner->spec();
    // K and V bytes per (layer, head): steady-state slopes between two lengths that every
    // group size up to 4096 divides.
    const HeadBytes a = simulate_head_bytes(*inner, geo.head_dim, 4096), b = simulate_head_bytes(*inner, geo.head_dim, 8192);
    const double k_slope = (b.k - a.k) / 4096.0, v_slope = (b.v - a.v) / 4096.0;
    m->k_share_ = k_slope + v_slope > 0 ? k_slope / (k_slope + v_slope) : 0.5;
    m->inner_ = std::move(inner);
    return std::unique_ptr<Method>(std::move(m));
  }

  const std::string& spec() const override { return spec_; }

  LayerPlan layer_plan(int layer) const override {
    LayerPlan p;
    if (base_[layer] < 0) return p;
    p.score_layer = base_[layer];
    if (mode_ == Mode::kGla) p.stores_k = false;
    else {
      p.visual_only = true;
      p.base_scores = base_scores_;
    }
    return p;
  }

  std::vector<const Codec*> codecs() const override { return inner_->codecs(); }

  std::unique_ptr<LayerState> new_layer_state(int layer) const override {
    if (mode_ == Mode::kGla) return inner_->new_layer_state(layer);
    auto s = std::make_unique<PartitionState>();
    for (auto& p : s->inner) p = inner_->new_layer_state(layer);
    return s;
  }

  Status store(const StoreInput& in, LayerEditor& ed) const override {
    const bool lazy = base_[in.layer] >= 0;
    if (mode_ == Mode::kGla) {
      LayerEditor view = ed.view(0, lazy, nullptr);
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
      LayerEditor view = ed.view(visual ? kSpaceVisual : kSpaceText, lazy && visual, st->inner[p].get());
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
    if (n_lazy_ == 0) return full;
    return full - static_cast<double>(n_lazy_) * geo_.n_kv_heads * simulate_head_bytes(*inner_, geo_.head_dim, n).k;
  }
  int max_streams_per_head() const override { return (mode_ == Mode::kVla ? 2 : 1) * inner_->max_streams_per_head(); }
  double error_bound() const override { return inner_->error_bound(); }
  double rms_error_bound() const override { return inner_->rms_error_bound(); }
  int error_block_tokens() const override { return inner_->error_block_tokens(); }

 private:
  Mode mode_ = Mode::kGla;
  bool base_scores_ = true;  // VLA share=scores: visual keys scored with the base layer's queries
  KvGeometry geo_;
  std::string spec_;
  std::unique_ptr<Method> inner_;
  std::vector<int> base_;  // [n_layers] -1 standard, else the layer whose q and k a lazy layer reuses
  int n_lazy_ = 0;
  double k_share_ = 0.5;  // K's share of the inner method's steady-state bytes
};

std::vector<ParamInfo> qcache_params(Mode mode) {
  std::vector<ParamInfo> p = {
      {"grouping", "auto", "lazy blocks: auto (map if given, else pattern), pattern (layers 3, 5, 7, ... up to "
                           "n_layers-2 lazy), map, random (n_lazy layers at random: the paper's sanity baseline)"},
      {"map", "", "calibration map from vlkv calibrate (JSON; must match the model)"},
      {"n_lazy", "-1", "number of lazy layers: regroups the map by its JSD table, or the random count"},
      {"threshold", "-1", "with map: layers whose JSD to the layer before is below this are lazy"},
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
