// Method "zipvl": ZipVL v1 (arXiv 2410.08584), dynamic important-token ratio with a
// mixed-precision cache and sparse prefill.
//  - Importance: the probe queries' attention mass per key (kStatKeyMass: the last
//    `probe` share of a step's queries plus a random `probe` share, seeded), normalized
//    for the causal mask and summed over the GQA group, per kv head.
//  - Adaptive ratio: per layer and kv head, the smallest set holding >= tau of the mass
//    (zipvl_ratio.h) is important.
//  - Codecs: important tokens at `hi` bits, the rest at `lo`, KIVI-style: keys per channel
//    over groups of g tokens (intBc), values per token in groups of g channels (intB).
//    Keys have outlier channels; per-token 2-bit keys lose them (KIVI), per-channel
//    groups give each channel its own range. The price: a class's tokens wait in an f16
//    staging segment until a group of g fills (window_fold.h).
//  - Decode: new tokens wait in an f16 window, their mass accumulating from every step's
//    probe (the decode token itself). When the window reaches `rescore` tokens (at once
//    for a prefill step of >= rescore tokens) they are scored, split by the tau rule over
//    the window's tokens, and quantized; a shorter prompt waits with the decode tokens.
//  - Sparse prefill (sparse=1, steps of >= kMinSparseStep tokens): the probe statistics
//    come first, the tau rule over every key of the step (cached + new) picks the keys,
//    and all the step's queries attend only those plus themselves
//    (Method::select_attended_keys). Non-important queries keep their own key so no row
//    is empty and each token still sees itself; the paper's kernel drops them entirely.
//    The probes cost one scoring pass either way (probe_stats); the cache attends every
//    key when the selection would skip less than 15% of the work (kMaxSparseWork in
//    kv/attention.h: flat attention keeps most keys), so sparse=1 never does more work
//    than sparse=0 beyond the selection itself (a sort of each head's key mass).
//
// Per (layer, kv head) segments by tag: kHi, kLo (compressed), kWindow (f16, sequence
// order), kStageHi, kStageLo (f16, < g tokens of a class). Tokens are stored out of
// sequence order; the layer state keeps each stored token's position
// (Method::stored_positions) and the window's accumulated mass.
//
// Accounting: the mix depends on the data. bits_per_element() and bytes_per_token()
// report the configured worst case (every token important, hi bits: at hi=4, g=32 5.0
// bits/element for K and for V; lo=2 alone would be 3.0), and bytes_for_tokens(n) the
// upper bound (window and stagings full of f16 rows, the rest at hi bits): reports say
// "at most". min_bytes_for_tokens(n) is the lower bound (every token at lo bits). What a
// sequence really holds is the pool's bytes_in_use.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/codecs/int_codec.h"
#include "kv/kv_bytes.h"
#include "kv/codecs/int_tiles.h"
#include "kv/method_registry.h"
#include "kv/methods/window_fold.h"
#include "kv/methods/zipvl/zipvl_ratio.h"
#include "kv/methods/pair_bits.h"

namespace vlkv {
namespace {

constexpr uint32_t kHi = 0, kLo = 1, kWindow = 2, kStageHi = 3, kStageLo = 4;
constexpr int kTags = 5;
// Sparse attention pays for its probe passes only on long steps.
constexpr int kMinSparseStep = 64;

class ZipvlState final : public LayerState {
 public:
  std::unique_ptr<LayerState> clone() const override { return std::make_unique<ZipvlState>(*this); }
  bool save(ByteWriter& w) const override {
    w.vec(window_pos);
    w.vec(window_seen);
    for (const auto& m : window_mass) w.vec(m);
    for (const auto& head : pos)
      for (const auto& p : head) w.vec(p);
    return true;
  }
  // Sizes as the segments hold tokens (every position within the layer's tokens): what
  // stored_positions and the statistics index by.
  bool load(ByteReader& r, const LayerCache* layer) override {
    if (!layer || window_mass.size() != layer->heads.size() || pos.size() != layer->heads.size()) return false;
    const int64_t n = layer->n_tokens;
    auto in_range = [n](const std::vector<int64_t>& v) {
      return std::all_of(v.begin(), v.end(), [n](int64_t p) { return p >= 0 && p < n; });
    };
    window_pos = r.vec<int64_t>();
    window_seen = r.vec<double>();
    const size_t w = window_pos.size();
    if (!r.ok() || window_seen.size() != w || !in_range(window_pos)) return false;
    for (auto& m : window_mass) {
      m = r.vec<double>();
      if (!r.ok() || m.size() != w) return false;
    }
    for (size_t h = 0; h < pos.size(); ++h) {
      int64_t tokens[kTags] = {};
      for (const Segment& s : layer->heads[h].segments) {
        if (s.tag >= kTags) return false;
        tokens[s.tag] += s.n_tokens;
      }
      if (tokens[kWindow] != static_cast<int64_t>(w)) return false;
      for (int t = 0; t < kTags; ++t) {
        pos[h][t] = r.vec<int64_t>();
        if (!r.ok() || !in_range(pos[h][t])) return false;
        if (t != kWindow && static_cast<int64_t>(pos[h][t].size()) != tokens[t]) return false;
      }
    }
    return true;
  }
  // Window tokens, sequence order (the same tokens for every kv head).
  std::vector<int64_t> window_pos;         // [w] positions
  std::vector<double> window_seen;         // [w] probes that saw each token so far
  std::vector<std::vector<double>> window_mass;  // [n_kv][w] sum of probe mass (score * seen)
  // Positions of each segment's tokens in storage order, per kv head and tag.
  std::vector<std::vector<std::vector<int64_t>>> pos;  // [n_kv][kTags][tokens]
};

class ZipvlMethod final : public Method, public KeySelector {
 public:
  static Result<std::unique_ptr<Method>> create(const Spec& spec, const KvGeometry& geo) {
    VLKV_ASSIGN_OR_RETURN(double tau, spec.get_double("tau", 0.97, 0.01, 1.0));
    VLKV_ASSIGN_OR_RETURN(int64_t hi, spec.get_int("hi", 4, 2, 8));
    VLKV_ASSIGN_OR_RETURN(int64_t lo, spec.get_int("lo", 2, 2, 8));
    for (auto [name, b] : {std::pair{"hi", hi}, std::pair{"lo", lo}})
      if (b != 2 && b != 3 && b != 4 && b != 8)
        return invalid_argument("'zipvl': " + std::string(name) + "=" + std::to_string(b) +
                                " is not supported; valid: 2, 3, 4, 8");
    if (lo > hi)
      return invalid_argument("'zipvl': lo=" + std::to_string(lo) + " exceeds hi=" + std::to_string(hi));
    VLKV_ASSIGN_OR_RETURN(int64_t rescore, spec.get_int("rescore", 100, 1, 1 << 16));
    VLKV_ASSIGN_OR_RETURN(double probe, spec.get_double("probe", 0.05, 0.0, 0.5));
    VLKV_ASSIGN_OR_RETURN(int64_t seed, spec.get_int("seed", 0, 0, int64_t{1} << 62));
    VLKV_ASSIGN_OR_RETURN(int64_t sparse, spec.get_int("sparse", 0, 0, 1));
    VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", 32, 8, 256));
    if (g % 8 != 0) return invalid_argument("'zipvl': g=" + std::to_string(g) + " is not a multiple of 8 in [8, 256]");
    const int64_t gv = spec.has("g") || geo.head_dim % g == 0 ? g : geo.head_dim;  // value channel group
    auto m = std::unique_ptr<ZipvlMethod>(new ZipvlMethod());
    VLKV_ASSIGN_OR_RETURN(m->k_hi_, make_int_codec({.bits = static_cast<int>(hi), .G = static_cast<int>(g)}));
    VLKV_ASSIGN_OR_RETURN(m->k_lo_, make_int_codec({.bits = static_cast<int>(lo), .G = static_cast<int>(g)}));
    // Values in 16-token value tiles (VNNI accumulate on the codes, int_tiles.h) when the
    // groups of g tokens fill whole tiles and the bits allow; else one token per block.
    auto values = [&](int64_t bits) {
      const bool tiles = intt::tiles_pay(static_cast<int>(bits), geo.head_dim, gv) && g % intt::kTileTokens == 0;
      return make_int_codec({.bits = static_cast<int>(bits), .g = static_cast<int>(gv),
                             .layout = tiles ? IntLayout::kValueTiles : IntLayout::kRows});
    };
    VLKV_ASSIGN_OR_RETURN(m->v_hi_, values(hi));
    VLKV_ASSIGN_OR_RETURN(m->v_lo_, values(lo));
    VLKV_ASSIGN_OR_RETURN(m->w_, make_codec("f16"));
    for (const Codec* c : m->codecs()) VLKV_RETURN_IF_ERROR(c->check_head_dim(geo.head_dim).with_context("KV method zipvl"));
    char text[200];
    std::snprintf(text, sizeof text, "zipvl:tau=%g,hi=%lld,lo=%lld,rescore=%lld,probe=%g,seed=%lld,sparse=%lld,g=%lld",
                  tau, static_cast<long long>(hi), static_cast<long long>(lo), static_cast<long long>(rescore), probe,
                  static_cast<long long>(seed), static_cast<long long>(sparse), static_cast<long long>(g));
    m->spec_ = text;
    m->geo_ = geo;
    m->tau_ = tau;
    m->rescore_ = rescore;
    m->probe_ = probe;
    m->seed_ = static_cast<uint64_t>(seed);
    m->sparse_ = sparse != 0;
    m->G_ = static_cast<int>(g);
    return std::unique_ptr<Method>(std::move(m));
  }

  const std::string& spec() const override { return spec_; }
  std::vector<const Codec*> codecs() const override {
    return {k_hi_.get(), k_lo_.get(), v_hi_.get(), v_lo_.get(), w_.get()};
  }
  LayerPlan layer_plan(int) const override {
    LayerPlan p;
    p.stats = kStatKeyMass;
    p.probe = ProbePlan{probe_, probe_, seed_};
    p.sparse_attention = sparse_;
    return p;
  }
  std::unique_ptr<LayerState> new_layer_state(int) const override {
    auto s = std::make_unique<ZipvlState>();
    s->window_mass.resize(geo_.n_kv_heads);
    s->pos.assign(geo_.n_kv_heads, std::vector<std::vector<int64_t>>(kTags));
    return s;
  }

  const KeySelector* key_selector() const override { return this; }
  bool select_attended_keys(const StoreInput& in, std::vector<uint8_t>* keep) const override {
    if (in.n_new < kMinSparseStep || !in.stats || !in.stats->key_mass) return false;
    const int64_t n_keys = in.n_cached + in.n_new;
    keep->assign(static_cast<size_t>(geo_.n_kv_heads) * n_keys, 0);
    for (int h = 0; h < geo_.n_kv_heads; ++h)
      zipvl::important_by_mass(in.stats->key_mass + h * n_keys, n_keys, tau_, keep->data() + h * n_keys);
    return true;
  }

  Status store(const StoreInput& in, LayerEditor& ed) const override;

  bool stored_positions(const LayerState* state, int kv_head, const std::vector<Segment>& segments,
                        std::vector<int64_t>* positions) const override {
    const auto* s = static_cast<const ZipvlState*>(state);
    positions->clear();
    for (const Segment& seg : segments) {
      const auto& p = seg.tag == kWindow ? s->window_pos : s->pos[kv_head][seg.tag];
      positions->insert(positions->end(), p.begin(), p.end());
    }
    return true;
  }

  double bits_per_element() const override { return pair_bits_per_element(*k_hi_, *v_hi_, geo_.head_dim); }
  double bytes_per_token() const override { return heads() * hi_token_bytes(); }
  double min_bytes_for_tokens(int64_t n) const override { return heads() * lo_token_bytes() * static_cast<double>(n); }
  double bytes_for_tokens(int64_t n) const override {
    const int64_t f16_rows = std::min<int64_t>(n, rescore_ - 1 + 2 * (G_ - 1));  // window + two stagings
    return heads() * (static_cast<double>(f16_rows) * 2.0 * static_cast<double>(w_->block_bytes(geo_.head_dim)) +
                      static_cast<double>(n - f16_rows) * hi_token_bytes());
  }
  // hi, lo, window, two stagings (+ a staging being rebuilt within a step).
  int max_streams_per_head() const override { return 12; }
  // A class's g-token key group holds tokens from anywhere in the sequence: the bound is
  // relative to max|x| over the whole head.
  int error_block_tokens() const override { return 1 << 30; }
  double error_bound() const override {
    return std::max({k_lo_->error_bound(), v_lo_->error_bound(), k_hi_->error_bound(), v_hi_->error_bound()}) + 0x1p-10;
  }

 private:
  double heads() const { return static_cast<double>(geo_.n_layers) * geo_.n_kv_heads; }
  double hi_token_bytes() const {
    const int d = geo_.head_dim;
    return k_hi_->bytes_per_token(d) + v_hi_->bytes_per_token(d);
  }
  double lo_token_bytes() const {
    const int d = geo_.head_dim;
    return k_lo_->bytes_per_token(d) + v_lo_->bytes_per_token(d);
  }

  // Rows of one class (sequence order; rows r at k + r * stride) to its staging segment,
  // whose whole groups of G go to the class's compressed segment; positions follow.
  Status to_class(LayerEditor& ed, ZipvlState& st, int h, bool hi, const float* k, const float* v, int64_t stride,
                  const std::vector<int64_t>& pos) const {
    const uint32_t target = hi ? kHi : kLo, stage = hi ? kStageHi : kStageLo;
    auto sink = [&](const float* kk, const float* vv, int64_t s, int64_t, int64_t m) -> Status {
      int seg = window_fold::find_segment(ed, h, target);
      if (seg < 0) seg = ed.add_segment(h, hi ? k_hi_.get() : k_lo_.get(), hi ? v_hi_.get() : v_lo_.get(), target);
      return ed.append(h, seg, kk, vv, s, m);
    };
    VLKV_ASSIGN_OR_RETURN(int64_t folded, window_fold::stage(ed, h, stage, w_.get(), 0, G_, k, v, stride,
                                                             static_cast<int64_t>(pos.size()), sink));
    auto& staged = st.pos[h][stage];
    staged.insert(staged.end(), pos.begin(), pos.end());
    auto& dst = st.pos[h][target];
    dst.insert(dst.end(), staged.begin(), staged.begin() + folded);
    staged.erase(staged.begin(), staged.begin() + folded);
    return Status::ok();
  }

  std::string spec_;
  std::shared_ptr<const Codec> k_hi_, k_lo_, v_hi_, v_lo_, w_;
  KvGeometry geo_;
  double tau_ = 0.97;
  int64_t rescore_ = 100;
  double probe_ = 0.05;
  uint64_t seed_ = 0;
  bool sparse_ = true;
  int G_ = 32;
};

Status ZipvlMethod::store(const StoreInput& in, LayerEditor& ed) const {
  auto& st = *static_cast<ZipvlState*>(ed.state());
  const int n_kv = ed.n_kv_heads(), d = ed.head_dim();
  const int64_t stride = static_cast<int64_t>(n_kv) * d;  // rows of one head in in.k / in.v
  const int64_t w = static_cast<int64_t>(st.window_pos.size()), total = w + in.n_new;
  const int64_t n_keys = in.n_cached + in.n_new;
  const AttentionStats* stats = in.stats && in.stats->key_mass ? in.stats : nullptr;

  // 1. This step's probe mass onto the window tokens (cached: every probe saw them) and
  // the new ones (seen by the probes at or after them). Sums, not means: later steps add.
  std::vector<double> new_seen(in.n_new, 0.0);
  if (stats)
    for (int j = 0; j < in.n_new; ++j)
      new_seen[j] = static_cast<double>(stats->probes + stats->n_probes -
                                        std::lower_bound(stats->probes, stats->probes + stats->n_probes, j));
  for (int h = 0; h < n_kv; ++h) {
    auto& mass = st.window_mass[h];
    mass.resize(w, 0.0);
    if (stats && w > 0) {
      int64_t off = 0;  // the window's first token in step key order
      const auto segs = ed.segments(h);
      for (size_t i = 0; i < segs.size() && segs[i].tag != kWindow; ++i) off += segs[i].n_tokens;
      const float* km = stats->key_mass + h * n_keys + off;
      for (int64_t t = 0; t < w; ++t) mass[t] += static_cast<double>(km[t]) * stats->n_probes;
    }
    for (int j = 0; j < in.n_new; ++j)
      mass.push_back(stats ? static_cast<double>(stats->key_mass[h * n_keys + in.n_cached + j]) * new_seen[j] : 0.0);
  }
  if (stats)
    for (auto& s : st.window_seen) s += stats->n_probes;
  st.window_seen.insert(st.window_seen.end(), new_seen.begin(), new_seen.end());
  for (int j = 0; j < in.n_new; ++j) st.window_pos.push_back(in.n_cached + j);

  // 2. Below `rescore` tokens the new rows just join the window.
  if (total < rescore_) {
    for (int h = 0; h < n_kv; ++h) {
      int seg = window_fold::find_segment(ed, h, kWindow);
      if (seg < 0) seg = ed.add_segment(h, w_.get(), w_.get(), kWindow, /*reread=*/true);
      VLKV_RETURN_IF_ERROR(ed.append(h, seg, in.k + h * d, in.v + h * d, stride, in.n_new));
    }
    return Status::ok();
  }

  // 3. Score the window + new tokens, split them by the tau rule and quantize.
  std::vector<float> rows_k(static_cast<size_t>(total) * d), rows_v(rows_k.size());  // [total, d] sequence order
  std::vector<float> score(total);
  std::vector<uint8_t> important(total);
  std::vector<float> ck[2], cv[2];  // per class rows: [n, d]
  std::vector<int64_t> cpos[2];
  for (int h = 0; h < n_kv; ++h) {
    const int wseg = window_fold::find_segment(ed, h, kWindow);
    if (w > 0) ed.read(h, wseg, 0, w, rows_k.data(), rows_v.data());
    for (int j = 0; j < in.n_new; ++j) {
      std::copy_n(in.k + j * stride + h * d, d, &rows_k[(w + j) * d]);
      std::copy_n(in.v + j * stride + h * d, d, &rows_v[(w + j) * d]);
    }
    for (int64_t t = 0; t < total; ++t)
      score[t] = st.window_seen[t] > 0 ? static_cast<float>(st.window_mass[h][t] / st.window_seen[t]) : 0.0f;
    zipvl::important_by_mass(score.data(), total, tau_, important.data());
    for (int c = 0; c < 2; ++c) {
      ck[c].clear();
      cv[c].clear();
      cpos[c].clear();
    }
    for (int64_t t = 0; t < total; ++t) {
      const int c = important[t] ? 1 : 0;
      ck[c].insert(ck[c].end(), &rows_k[t * d], &rows_k[t * d] + d);
      cv[c].insert(cv[c].end(), &rows_v[t * d], &rows_v[t * d] + d);
      cpos[c].push_back(st.window_pos[t]);
    }
    if (wseg >= 0) ed.remove_segment(h, wseg);
    for (int c = 0; c < 2; ++c)
      if (!cpos[c].empty()) VLKV_RETURN_IF_ERROR(to_class(ed, st, h, c == 1, ck[c].data(), cv[c].data(), d, cpos[c]));
    st.window_mass[h].clear();
  }
  st.window_pos.clear();
  st.window_seen.clear();
  return Status::ok();
}

MethodInfo zipvl_info() {
  MethodInfo info;
  info.name = "zipvl";
  info.help =
      "ZipVL: per layer the smallest set of tokens holding tau of the probe queries' attention mass is important "
      "(hi bits), the rest lo bits; keys per channel over g tokens, values per token; decode tokens f16 until "
      "re-scored every `rescore` tokens; optional sparse prefill over the important keys (sparse=1); bits/element and "
      "bytes: the all-important worst case";
  info.params = {
      {"tau", "0.97", "share of the probe attention mass the important tokens hold (0.01..1)"},
      {"hi", "4", "bits of important tokens' K and V: 2, 3, 4 or 8"},
      {"lo", "2", "bits of the other tokens' K and V: 2, 3, 4 or 8 (<= hi)"},
      {"rescore", "100", "window of f16 tokens scored and quantized together (decode tokens wait here)"},
      {"probe", "0.05", "probe queries: the last share plus a random share of a step's queries (0..0.5)"},
      {"seed", "0", "seed of the random probes"},
      {"sparse", "0", "1 = prefill steps of >= 64 tokens attend only the important keys (+ themselves) where that skips >15% of the attention's work (else every key): faster prefill on peaked attention, changed outputs"},
      {"g", "32", "group: keys per channel over g tokens, values per token over g channels"}};
  info.create = [](const Spec& s, const KvGeometry& g) { return ZipvlMethod::create(s, g); };
  return info;
}

}  // namespace

VLKV_REGISTER_KV_METHOD(zipvl, zipvl_info());

}  // namespace vlkv
