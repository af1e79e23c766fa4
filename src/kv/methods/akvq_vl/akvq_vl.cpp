// Method "akvq_vl": AKVQ-VL (arXiv 2501.15021), attention-aware 2-bit KV for VLMs.
//  - Codes: K (post-RoPE) and V rows Walsh-Hadamard rotated (wht_intB codecs: queries
//    rotated by the codec's query transform, outputs un-rotated once per step), then
//    asymmetric uniform per token in groups of g channels (default 128, or head_dim when
//    smaller; f16 scale + min per group), clipping ratio `clip` (0.8 at 2 bits, 0.9 at 3,
//    1.0 at 4: the group's [min, max] shrunk around its centre, int_codec_core.h).
//    At 2, 4 and 8 bits (g and head_dim multiples of 16: intt::tiles_pay) a class's codes
//    live in 16-token tiles - keys layout=k, values layout=v - so decode attention runs
//    the int codecs' integer dots on them (queries / probabilities rounded to 15 / 14
//    bits, dot=8 - the default at 2 bits: 8 / 7); the class's newest < 16 rows wait in an f16 staging segment
//    until their tile fills (window_fold.h with keep 0, as the int2 / int4 methods).
//    3-bit classes, and groups not a multiple of 16 (g = 8, 24, ...), keep the rows
//    layout (one token per block, no staging).
//  - Per layer a saliency pattern (saliency.h):
//      TSA (text-salient): text and special tokens at text_bits (4), visual tokens at bits (2);
//      PSA (pivot-salient): the layer's pivot tokens in f16, every other token at bits (2).
//    pattern=auto detects it from the prefill's attention statistics (kStatKeyMass: the
//    share of mass on text tokens vs on the top n_pivots tokens); without statistics
//    (none computed yet, or a step of one token) it keeps its last decision, else the
//    paper's LLaVA-1.5 map: layers [0, tsa_layers) TSA, the rest PSA. pattern=map, tsa and
//    psa force it. Statistics are read only from steps of more than one token (prefill
//    chunks): a single decode query is too noisy to re-decide a layer, and the layer plan
//    says so (LayerPlan::stats_in_decode = false: decode steps skip the extra scores
//    pass). The pattern can change between prefill
//    chunks; it applies to the tokens folded from then on. Wrapping methods refuse an inner
//    method that needs statistics, so akvq_vl is never wrapped.
//  - Pivots (per kv head, at most n_pivots, kept f16 for the rest of the sequence): the
//    tokens with the largest probe attention mass in a prefill step among those still in
//    full precision (the window and the step's tokens), if they rank in the top n_pivots
//    of the whole sequence. Without statistics in any step so far: the first n_pivots
//    tokens of the sequence (attention sinks, where massive activations sit). Pivots only
//    matter in PSA layers; TSA layers fold them by kind.
//  - Text-only inputs: every token is text, so TSA would store every folded token at
//    text_bits (int4 with WHT); auto calls such layers PSA (TSA's text/visual split is void
//    there), map / tsa keep TSA in their layers (4.25 bits/element at d128).
//  - Recent window: the last `window` tokens stay f16 (window..window+31: it is folded 32
//    rows at a time with window_fold.h to amortize its rewrite; all rows at once when
//    window=0). Folded rows go to their class's segment. Segments by tag: layer_state.h.
//
// Accounting (bits_per_element, bytes_per_token, bytes_for_tokens) assumes visual tokens
// and no statistics, the setting whose bytes do not depend on the data: every folded token
// at `bits` except, in PSA layers, the first min(n_pivots, folded) tokens in f16, and a
// tiled class's last (rows % 16) rows staged in f16 (window and staging included in
// bytes_for_tokens, exact there; min_bytes_for_tokens drops the pivots: a lower bound for
// any data). At head_dim 128, g 128: 2 + 32/128 = 2.25 bits per element, in rows or
// tiles alike. TSA text tokens cost text_bits + 32/g (4.25) each instead, pivots 16 (at
// most n_pivots per head and PSA layer).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/codecs/int_codec.h"
#include "kv/codecs/int_tiles.h"
#include "kv/method_registry.h"
#include "kv/methods/akvq_vl/layer_state.h"
#include "kv/methods/akvq_vl/saliency.h"
#include "kv/methods/window_fold.h"
#include "kv/methods/pair_bits.h"

namespace vlkv {
namespace {

using akvq::Pattern;

constexpr uint32_t kLow = akvq::kTagLow, kText = akvq::kTagText, kPivot = akvq::kTagPivot, kWindow = akvq::kTagWindow;
constexpr int kTile = intt::kTileTokens;  // rows per tile of a tiled class
constexpr int kFoldRows = 32;  // window fold granularity (the window holds window..window+31 rows)

enum class PatternMode { kAuto, kTsa, kPsa, kMap };

// Clipping ratio by code bits: the paper's 0.8 at 2 and 1.0 at 4; 0.9 at 3 is our pick.
double default_clip(int64_t bits) { return bits <= 2 ? 0.8 : bits == 3 ? 0.9 : 1.0; }

using akvq::AkvqHead;
using akvq::AkvqState;
using akvq::class_first_row;
using akvq::class_of;
using akvq::ClassCodecs;
using akvq::key_kinds;
using akvq::PosRuns;
using akvq::window_key0;

class AkvqVlMethod final : public Method {
 public:
  static Result<std::unique_ptr<Method>> create(const Spec& spec, const KvGeometry& geo) {
    const std::string who = "'akvq_vl'";
    VLKV_ASSIGN_OR_RETURN(int64_t bits, spec.get_int("bits", 2, 2, 4));
    VLKV_ASSIGN_OR_RETURN(int64_t text_bits, spec.get_int("text_bits", 4, 2, 8));
    if (text_bits != 2 && text_bits != 3 && text_bits != 4 && text_bits != 8)
      return invalid_argument(who + ": text_bits=" + std::to_string(text_bits) + " is not supported; valid: 2, 3, 4, 8");
    const int64_t g_default = std::min(128, geo.head_dim);
    VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", g_default, 0, 1024));
    if (g == 0) g = geo.head_dim;
    if (g % 8 != 0 || geo.head_dim % g != 0)
      return invalid_argument(who + ": g=" + std::to_string(g) + " does not divide head_dim " +
                              std::to_string(geo.head_dim) +
                              "; valid: a multiple of 8 dividing head_dim, or 0 for the whole head");
    VLKV_ASSIGN_OR_RETURN(double clip, spec.get_double("clip", default_clip(bits), 0.05, 1.0));
    VLKV_ASSIGN_OR_RETURN(double text_clip, spec.get_double("text_clip", default_clip(text_bits), 0.05, 1.0));
    VLKV_ASSIGN_OR_RETURN(int64_t n_pivots, spec.get_int("n_pivots", 16, 0, 1024));
    VLKV_ASSIGN_OR_RETURN(int64_t window, spec.get_int("window", 128, 0, 1 << 16));
    const std::string pattern = spec.get_string("pattern", "auto");
    PatternMode mode;
    if (pattern == "auto") mode = PatternMode::kAuto;
    else if (pattern == "tsa") mode = PatternMode::kTsa;
    else if (pattern == "psa") mode = PatternMode::kPsa;
    else if (pattern == "map") mode = PatternMode::kMap;
    else return invalid_argument(who + ": pattern=" + pattern + " is not supported; valid: auto, tsa, psa, map");
    VLKV_ASSIGN_OR_RETURN(int64_t tsa_layers, spec.get_int("tsa_layers", 2, 0, 1 << 16));
    VLKV_ASSIGN_OR_RETURN(int64_t wht, spec.get_int("wht", 1, 0, 1));
    VLKV_ASSIGN_OR_RETURN(const int dot, intt::parse_dot_bits(spec, "akvq_vl"));

    // Tiles where they pay (the VNNI path); the dot rounding only exists there.
    auto codecs_for = [&](int64_t b, double c) -> Result<ClassCodecs> {
      IntCodecParams p{.bits = static_cast<int>(b), .g = static_cast<int>(g), .clip = canonical_clip(c), .wht = wht != 0};
      ClassCodecs cc;
      cc.tiled = intt::tiles_pay(static_cast<int>(b), geo.head_dim, g);
      if (!cc.tiled) {
        VLKV_ASSIGN_OR_RETURN(cc.k, make_int_codec(p));
        cc.v = cc.k;
        return cc;
      }
      p.dot_bits = dot;
      p.layout = IntLayout::kKeyTiles;
      VLKV_ASSIGN_OR_RETURN(cc.k, make_int_codec(p));
      p.layout = IntLayout::kValueTiles;
      VLKV_ASSIGN_OR_RETURN(cc.v, make_int_codec(p));
      return cc;
    };
    auto m = std::unique_ptr<AkvqVlMethod>(new AkvqVlMethod());
    VLKV_ASSIGN_OR_RETURN(m->low_, codecs_for(bits, clip));
    VLKV_ASSIGN_OR_RETURN(m->text_, codecs_for(text_bits, text_clip));
    VLKV_ASSIGN_OR_RETURN(m->f16_, make_codec("f16"));
    for (const auto* c : m->codecs())
      VLKV_RETURN_IF_ERROR(c->check_head_dim(geo.head_dim).with_context("KV method akvq_vl"));
    char text[240];
    std::snprintf(text, sizeof text,
                  "akvq_vl:bits=%lld,text_bits=%lld,g=%lld,clip=%g,text_clip=%g,n_pivots=%lld,window=%lld,"
                  "pattern=%s,tsa_layers=%lld,wht=%lld,dot=%s",
                  static_cast<long long>(bits), static_cast<long long>(text_bits), static_cast<long long>(g), clip,
                  text_clip, static_cast<long long>(n_pivots), static_cast<long long>(window), pattern.c_str(),
                  static_cast<long long>(tsa_layers), static_cast<long long>(wht),
                  dot ? std::to_string(dot).c_str() : "auto");
    m->spec_ = text;
    m->geo_ = geo;
    m->mode_ = mode;
    m->P_ = static_cast<int>(n_pivots);
    m->R_ = window;
    m->tsa_layers_ = static_cast<int>(tsa_layers);
    m->bits_ = static_cast<int>(std::min(bits, text_bits));
    m->clip_ = clip;
    m->text_clip_ = text_clip;
    return std::unique_ptr<Method>(std::move(m));
  }

  const std::string& spec() const override { return spec_; }
  std::vector<const Codec*> codecs() const override {
    std::vector<const Codec*> out;
    for (const Codec* c : {low_.k.get(), low_.v.get(), text_.k.get(), text_.v.get(), f16_.get()})
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    return out;
  }
  std::unique_ptr<LayerState> new_layer_state(int) const override { return std::make_unique<AkvqState>(); }

  LayerPlan layer_plan(int layer) const override {
    LayerPlan plan;
    if (wants_stats(layer)) plan.stats = kStatKeyMass;  // default probes: last 5% + random 5% of a step
    plan.stats_in_decode = false;  // store() reads only multi-token (prefill) steps' mass
    return plan;
  }

  Status store(const StoreInput& in, LayerEditor& ed) const override {
    auto* st = static_cast<AkvqState*>(ed.state());
    const int n_kv = ed.n_kv_heads(), d = ed.head_dim();
    const int64_t stride = static_cast<int64_t>(n_kv) * d;  // rows of one head in in.k / in.v
    if (st->heads.empty()) st->heads.resize(n_kv);
    const int64_t n_window = static_cast<int64_t>(st->heads[0].window_pivot.size());
    const int64_t first = in.n_cached - n_window;  // sequence position of the first full-precision row
    const int64_t n_keys = in.n_cached + in.n_new;
    const int64_t n_full = n_window + in.n_new;     // full-precision rows: window, then the step's
    st->kinds.append(in.kinds, in.n_new);
    const float* mass = in.n_new > 1 && in.stats ? in.stats->key_mass : nullptr;  // [n_kv, n_keys]

    // 1. The layer's pattern, then 2. pivot flags of the full-precision rows, per head.
    st->pattern = pattern_for(in.layer, in.n_cached, mass, ed, *st);
    for (int h = 0; h < n_kv; ++h) {
      AkvqHead& hs = st->heads[h];
      hs.window_pivot.resize(static_cast<size_t>(n_full), 0);
      if (mass) {
        const std::vector<akvq::KeyRange> ranges = {{window_key0(ed, h), 0, n_window}, {in.n_cached, n_window, in.n_new}};
        hs.n_pivots += akvq::select_pivots(mass + h * n_keys, n_keys, ranges, P_, P_ - hs.n_pivots,
                                           hs.window_pivot.data());
      } else if (!st->stats_seen) {  // attention sinks: the first P_ tokens
        for (int64_t t = in.n_cached; t < std::min<int64_t>(n_keys, P_); ++t, ++hs.n_pivots)
          hs.window_pivot[t - first] = 1;
      }
    }
    if (mass) st->stats_seen = true;

    // 3. New rows to the f16 window; rows it folds to their class's segment.
    int64_t folded = 0;
    for (int h = 0; h < n_kv; ++h) {
      AkvqHead& hs = st->heads[h];
      auto class_at = [&](int64_t row) { return class_of(st->pattern, st->kinds.at(first + row), hs.window_pivot[row]); };
      auto sink = [&](const float* k, const float* v, int64_t rs, int64_t row0, int64_t n) -> Status {
        for (int64_t r = 0; r < n;) {  // runs of one class
          const uint32_t tag = class_at(row0 + r);
          int64_t e = r + 1;
          while (e < n && class_at(row0 + e) == tag) ++e;
          VLKV_RETURN_IF_ERROR(to_class(ed, h, tag, k + r * rs, v + r * rs, rs, e - r));
          hs.folded[tag].append(st->kinds, first + row0 + r, first + row0 + e);
          hs.folded_pos[tag].append(first + row0 + r, first + row0 + e);
          r = e;
        }
        return Status::ok();
      };
      VLKV_ASSIGN_OR_RETURN(folded, window_fold::stage(ed, h, kWindow, f16_.get(), R_, fold_rows(), in.k + h * d,
                                                       in.v + h * d, stride, in.n_new, sink));
    }
    for (AkvqHead& hs : st->heads) hs.window_pivot.erase(hs.window_pivot.begin(), hs.window_pivot.begin() + folded);
    return Status::ok();
  }

  // Class segments hold their class's folded positions (code segment first, staging
  // last); the window the last rows, in order.
  bool stored_positions(const LayerState* state, int kv_head, const std::vector<Segment>& segments,
                        std::vector<int64_t>* positions) const override {
    const auto* st = static_cast<const AkvqState*>(state);
    positions->clear();
    if (st->heads.empty()) return true;
    const AkvqHead& hs = st->heads[kv_head];
    const int64_t n = st->kinds.size(), w = static_cast<int64_t>(hs.window_pivot.size());
    for (const Segment& seg : segments) {
      if (seg.tag == kWindow) {
        for (int64_t p = n - w; p < n; ++p) positions->push_back(p);
      } else {
        const PosRuns& pos = hs.folded_pos[akvq::class_of_tag(seg.tag)];
        const int64_t first = class_first_row(seg, pos.size());
        pos.expand(first, first + seg.n_tokens, positions);
      }
    }
    return true;
  }

  double bits_per_element() const override { return pair_bits_per_element(*low_.k, *low_.v, geo_.head_dim); }
  double bytes_per_token() const override { return geo_.n_layers * geo_.n_kv_heads * class_rate(low_); }
  // Exact for visual tokens without statistics (see the header comment).
  double bytes_for_tokens(int64_t n) const override {
    const int64_t w = window_tokens(n), c = n - w;
    double per_head = 0;
    for (int l = 0; l < geo_.n_layers; ++l) {
      const int64_t p = fallback_pattern(l) == Pattern::kPsa ? std::min<int64_t>(P_, c) : 0;
      per_head += static_cast<double>(w + p) * f16_rate() + class_bytes(low_, c - p);
    }
    return per_head * geo_.n_kv_heads;
  }
  // Lower bound whatever the data: no pivots, every folded token at the cheaper class's
  // rate, except that with both classes tiled (folded % 16) rows are staged in f16: the
  // rows outside whole tiles (each class's staging, the pivots) are congruent to the
  // folded count modulo 16, so at least that many.
  double min_bytes_for_tokens(int64_t n) const override {
    const int64_t w = window_tokens(n), c = n - w;
    const int64_t staged = low_.tiled && text_.tiled ? c % kTile : 0;
    const double rate = std::min(class_rate(low_), class_rate(text_));
    return geo_.n_layers * geo_.n_kv_heads *
           (static_cast<double>(w + staged) * f16_rate() + static_cast<double>(c - staged) * rate);
  }
  // kLow, kLowStage, kText, kTextStage, kPivot, kWindow (+ a window or staging segment
  // being rebuilt within a step), K and V each.
  int max_streams_per_head() const override { return 14; }
  // Per-token codes; in the rotated basis the bound grows by sqrt(g d) (int_codec_core.h),
  // true but loose (>= 1 for 2-bit codes); the f16 window adds its rounding to folded rows.
  double error_bound() const override {
    return std::max(low_.k->error_bound_at(geo_.head_dim), text_.k->error_bound_at(geo_.head_dim)) + 0x1p-10;
  }

  // Relative RMS round-trip error on i.i.d. rows (rotated: near-Gaussian): a b-bit grid over
  // clip x the range of g near-Gaussian values, ~0.38 at 2 bits, ~0.09 at 4 (window and
  // pivot rows are exact); declared for the default clipping (>= 0.7) only.
  double rms_error_bound() const override {
    return clip_ >= 0.7 && text_clip_ >= 0.7 ? 0.5 / static_cast<double>(1 << (bits_ - 2)) : -1.0;
  }

  int64_t window_tokens(int64_t n) const { return n < R_ + fold_rows() ? n : R_ + (n - R_) % fold_rows(); }

 private:
  int fold_rows() const { return R_ > 0 ? kFoldRows : 1; }

  // K + V bytes per token of a class's codes, and of an f16 row.
  double class_rate(const ClassCodecs& c) const {
    return c.k->bytes_per_token(geo_.head_dim) + c.v->bytes_per_token(geo_.head_dim);
  }
  double f16_rate() const { return 2.0 * static_cast<double>(f16_->block_bytes(geo_.head_dim)); }
  // Bytes of n rows folded into a class: whole tiles in codes, the rest staged in f16.
  double class_bytes(const ClassCodecs& c, int64_t n) const {
    const int64_t staged = c.tiled ? n % kTile : 0;
    return static_cast<double>(n - staged) * class_rate(c) + static_cast<double>(staged) * f16_rate();
  }
  bool wants_stats(int layer) const {
    switch (mode_) {
      case PatternMode::kAuto: return true;
      case PatternMode::kTsa: return false;
      case PatternMode::kPsa: return P_ > 0;
      case PatternMode::kMap: return P_ > 0 && layer >= tsa_layers_;
    }
    return false;
  }

  // The pattern without statistics: the forced one, or the paper's map.
  Pattern fallback_pattern(int layer) const {
    if (mode_ == PatternMode::kTsa) return Pattern::kTsa;
    if (mode_ == PatternMode::kPsa) return Pattern::kPsa;
    return layer < tsa_layers_ ? Pattern::kTsa : Pattern::kPsa;
  }

  // auto: detected from a prefill step's mass when usable, else the last decision, else the map.
  Pattern pattern_for(int layer, int64_t n_cached, const float* mass, const LayerEditor& ed, AkvqState& st) const {
    if (mode_ != PatternMode::kAuto) return fallback_pattern(layer);
    if (mass) {
      const int64_t n_keys = st.kinds.size();
      akvq::MassShares shares;
      for (int h = 0; h < ed.n_kv_heads(); ++h) shares.add_head(mass + h * n_keys, n_keys, key_kinds(ed, h, n_cached, st), P_);
      if (const auto detected = akvq::detect_pattern(shares)) {
        st.decided = true;
        return *detected;
      }
    }
    return st.decided ? st.pattern : fallback_pattern(layer);
  }

  // Index of the code segment of class `cls` (kLow, kText, kPivot), added when absent.
  int segment_for(LayerEditor& ed, int h, uint32_t cls) const {
    const int seg = window_fold::find_segment(ed, h, cls);
    if (seg >= 0) return seg;
    if (cls == kPivot) return ed.add_segment(h, f16_.get(), f16_.get(), cls);
    const ClassCodecs& c = cls == kText ? text_ : low_;
    return ed.add_segment(h, c.k.get(), c.v.get(), cls);
  }

  // Appends n rows (k, v rows r at k + r * rs) to class `cls`; a tiled class stages
  // them in f16 and moves whole tiles to its code segment (oldest first: class order).
  Status to_class(LayerEditor& ed, int h, uint32_t cls, const float* k, const float* v, int64_t rs, int64_t n) const {
    const ClassCodecs* c = cls == kText ? &text_ : cls == kLow ? &low_ : nullptr;
    if (!c || !c->tiled) return ed.append(h, segment_for(ed, h, cls), k, v, rs, n);
    const window_fold::Sink to_tiles = [&](const float* tk, const float* tv, int64_t ts, int64_t, int64_t tn) {
      return ed.append(h, segment_for(ed, h, cls), tk, tv, ts, tn);
    };
    return window_fold::stage(ed, h, akvq::stage_tag_of(cls), f16_.get(), /*keep=*/0, kTile, k, v, rs, n, to_tiles)
        .status();
  }

  std::string spec_;
  ClassCodecs low_, text_;
  std::shared_ptr<const Codec> f16_;
  KvGeometry geo_;
  PatternMode mode_ = PatternMode::kAuto;
  int P_ = 16;
  int64_t R_ = 128;
  int tsa_layers_ = 2;
  int bits_ = 2;  // the coarser of bits and text_bits
  double clip_ = 0.8, text_clip_ = 1.0;
};

MethodInfo akvq_vl_info() {
  MethodInfo info;
  info.name = "akvq_vl";
  info.help =
      "AKVQ-VL: Walsh-Hadamard-rotated K and V, asymmetric per token (groups of g channels); per layer TSA (text "
      "tokens text_bits, visual bits) or PSA (pivot tokens f16, the rest bits) from the prefill's attention, f16 "
      "recent window (2.25 bits/element at d128 for visual tokens); 2/4/8-bit codes in 16-token tiles (integer-dot decode)";
  info.params = {
      {"bits", "2", "code bits of visual tokens (TSA) and non-pivot tokens (PSA): 2, 3 or 4"},
      {"text_bits", "4", "code bits of text tokens in TSA layers: 2, 3, 4 or 8"},
      {"g", "128", "channels per group: a multiple of 8 dividing head_dim, 0 = head_dim (default 128, or head_dim "
                   "when smaller)"},
      {"clip", "0.8", "clipping ratio of the bits codes (default 0.8 at 2 bits, 0.9 at 3, 1 at 4)"},
      {"text_clip", "1", "clipping ratio of the text_bits codes (default by text_bits as clip)"},
      {"n_pivots", "16", "pivot tokens per kv head kept in f16 in PSA layers (top attention mass in the prefill; "
                         "the first n_pivots tokens without statistics)"},
      {"window", "128", "recent tokens kept in f16 (the window holds window..window+31)"},
      {"pattern", "auto", "per-layer pattern: auto (from the prefill's attention, else map), tsa, psa, map (layers "
                          "below tsa_layers TSA, the rest PSA)"},
      {"tsa_layers", "2", "layers [0, tsa_layers) are TSA in the map (LLaVA-1.5: 2)"},
      {"wht", "1", "1 = Walsh-Hadamard-rotate K and V (head_dim a power of two); 0 = plain RTN"},
      {"dot", "auto", intt::kDotHelp},
  };
  info.create = [](const Spec& s, const KvGeometry& g) { return AkvqVlMethod::create(s, g); };
  return info;
}

}  // namespace

VLKV_REGISTER_KV_METHOD(akvq_vl, akvq_vl_info());

}  // namespace vlkv
