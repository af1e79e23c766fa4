// Method "vidkv": VidKV (arXiv 2503.16257), 1.x-bit KV with correct dequantization.
//  - Keys: per block of G tokens, per-channel mixed precision (codec mixk): the
//    round(frac * head_dim) channels of largest range 2-bit min-max, the rest 1-bit sign
//    with scale mean|c| after a per-token FFT across them (fft=real: half spectrum, the
//    nominal budget; fft=complex: the released code's Re+Im, 2x the 1-bit cost; none).
//  - Values: ternary per channel over G tokens (codec ternary), code*scale, 5 trits per
//    byte. vfit picks codes and scale per channel and group (same bytes):
//      mean  the paper: threshold thr*mean|x|, scale mean|x|. Every nonzero code then
//            reconstructs at mean|x|, below the mean |x| of the values it stands for (0.80
//            vs 1.07 sigma on Gaussian data): all values shrink by ~25% in the same
//            direction, an error that attention's weighted sum does not average out.
//      scale the paper's codes, least-squares scale (mean |x| over the nonzero codes).
//      opt   (default) the least-squares threshold and scale per channel and group.
//    Measured (window=0): tinyvlm-shapes VQA 59.0% (mean) -> 70.0% (opt), f16 71.5%;
//    rand-llama-hd64 text KL 0.336 -> 0.120.
//  - Salient visual tokens: values 2-bit per channel over G tokens (codec int2c) instead
//    of ternary, keys as the others. The top k = max(32, floor(N*p/32)*32) of the step's N
//    visual tokens by StoreInput::visual_similarity (see vidkv_salient.h). Without that
//    signal (text-only models, or an engine that does not compute it) no token is salient.
//  - Recent window: the last `window` tokens (plus the unfinished group) stay f16 and are
//    folded group by group (window_fold.h, as KIVI's residual window).
//
// Per (layer, kv head) segments by tag: kMain (mixk K, ternary V), kWindow (f16, sequence
// order), and only once salient tokens appear kSalient (mixk K, int2c V) plus one f16
// staging segment per class (kStageMain, kStageSalient) holding < G folded tokens of a
// class until its group fills (a folded group of G sequence tokens mixes the classes).
// Window tokens' salient flags live in the layer state (the same for every kv head).
//
// Accounting (text-only / no salient tokens; salient tokens add (int2c - ternary) V bytes):
// bits_per_element() = (mixk + ternary) / 2 per element, at head_dim 128, G 32, frac 0.5,
// fft=real: (2.28125 + 2.1016) / 2 = 2.1914; bytes_for_tokens(n) is exact, window included.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/codecs/int_codec.h"
#include "kv/kv_bytes.h"
#include "kv/methods/vidkv/sign1_codecs.h"
#include "kv/method_registry.h"
#include "kv/methods/vidkv/vidkv_salient.h"
#include "kv/methods/window_fold.h"
#include "kv/methods/pair_bits.h"

namespace vlkv {
namespace {

constexpr uint32_t kMain = 0, kWindow = 1, kSalient = 2, kStageMain = 3, kStageSalient = 4;

// Salient flags of the window's tokens, in sequence order.
class VidkvState final : public LayerState {
 public:
  std::unique_ptr<LayerState> clone() const override { return std::make_unique<VidkvState>(*this); }
  bool save(ByteWriter& w) const override {
    w.vec(window_salient);
    return true;
  }
  bool load(ByteReader& r, const LayerCache* layer) override {
    window_salient = r.vec<uint8_t>();
    if (!r.ok() || !layer) return false;
    for (const HeadCache& h : layer->heads) {  // one flag per window token of every head
      int64_t w = 0;
      for (const Segment& s : h.segments) w += s.tag == kWindow ? s.n_tokens : 0;
      if (w != static_cast<int64_t>(window_salient.size())) return false;
    }
    return std::all_of(window_salient.begin(), window_salient.end(), [](uint8_t f) { return f <= 1; });
  }
  std::vector<uint8_t> window_salient;  // [window tokens]
};

class VidkvMethod final : public Method {
 public:
  static Result<std::unique_ptr<Method>> create(const Spec& spec, const KvGeometry& geo) {
    VLKV_ASSIGN_OR_RETURN(double frac, spec.get_double("frac", 0.5, 0.0, 1.0));
    const std::string fft_text = spec.get_string("fft", "real");
    VLKV_ASSIGN_OR_RETURN(sign1::FftMode fft, sign1::parse_fft_mode(fft_text, "vidkv"));
    VLKV_ASSIGN_OR_RETURN(int64_t window, spec.get_int("window", 128, 0, 1 << 16));
    VLKV_ASSIGN_OR_RETURN(double p, spec.get_double("p", 0.2, 0.0, 1.0));
    VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", 32, 8, 256));
    if (g % 8 != 0) return invalid_argument("'vidkv': g=" + std::to_string(g) + " is not a multiple of 8 in [8, 256]");
    VLKV_ASSIGN_OR_RETURN(double thr, spec.get_double("thr", 0.5, 0.0, 4.0));
    VLKV_ASSIGN_OR_RETURN(TernaryFit vfit, parse_ternary_fit(spec.get_string("vfit", "opt"), "vidkv"));
    auto m = std::unique_ptr<VidkvMethod>(new VidkvMethod());
    VLKV_ASSIGN_OR_RETURN(m->k_, make_mixk_codec(MixkParams{static_cast<int>(g), frac, fft}));
    VLKV_ASSIGN_OR_RETURN(m->v_, make_ternary_codec(TernaryParams{static_cast<int>(g), thr, vfit}));
    VLKV_ASSIGN_OR_RETURN(m->vs_, make_int_codec({.bits = 2, .G = static_cast<int>(g)}));
    VLKV_ASSIGN_OR_RETURN(m->w_, make_codec("f16"));
    for (const auto* c : {m->k_.get(), m->v_.get(), m->vs_.get(), m->w_.get()})
      VLKV_RETURN_IF_ERROR(c->check_head_dim(geo.head_dim).with_context("KV method vidkv"));
    char text[192];
    std::snprintf(text, sizeof text, "vidkv:frac=%g,fft=%s,window=%lld,p=%g,g=%lld,thr=%g,vfit=%s", frac,
                  sign1::fft_mode_name(fft), static_cast<long long>(window), p, static_cast<long long>(g), thr,
                  ternary_fit_name(vfit));
    m->spec_ = text;
    m->geo_ = geo;
    m->G_ = static_cast<int>(g);
    m->R_ = window;
    m->p_ = p;
    return std::unique_ptr<Method>(std::move(m));
  }

  const std::string& spec() const override { return spec_; }
  std::vector<const Codec*> codecs() const override { return {k_.get(), v_.get(), vs_.get(), w_.get()}; }
  std::unique_ptr<LayerState> new_layer_state(int) const override { return std::make_unique<VidkvState>(); }
  bool uses_visual_similarity() const override { return p_ > 0; }

  Status store(const StoreInput& in, LayerEditor& ed) const override {
    auto* state = static_cast<VidkvState*>(ed.state());
    const int n_kv = ed.n_kv_heads(), d = ed.head_dim();
    const int64_t stride = static_cast<int64_t>(n_kv) * d;  // rows of one head in in.k / in.v
    const std::vector<uint8_t> new_flags = vidkv::select_salient(in.kinds, in.visual_similarity, in.n_new, p_);
    // Flags of the sequence-order concatenation (window tokens, then the new ones).
    std::vector<uint8_t> flags = state->window_salient;
    flags.insert(flags.end(), new_flags.begin(), new_flags.end());
    int64_t folded = 0;
    for (int h = 0; h < n_kv; ++h) {
      if (ed.segments(h).empty()) ed.add_segment(h, k_.get(), v_.get(), kMain);  // index 0: storage order = sequence order
      auto sink = [&](const float* k, const float* v, int64_t rs, int64_t first, int64_t n) -> Status {
        return fold_rows(ed, h, k, v, rs, &flags[first], n);
      };
      VLKV_ASSIGN_OR_RETURN(folded, window_fold::stage(ed, h, kWindow, w_.get(), R_, G_, in.k + h * d, in.v + h * d,
                                                       stride, in.n_new, sink));
    }
    state->window_salient.assign(flags.begin() + folded, flags.end());
    return Status::ok();
  }

  double bits_per_element() const override { return pair_bits_per_element(*k_, *v_, geo_.head_dim); }
  double bytes_per_token() const override {
    const int d = geo_.head_dim;
    return static_cast<double>(geo_.n_layers) * geo_.n_kv_heads *
           static_cast<double>(k_->block_bytes(d) + v_->block_bytes(d)) / G_;
  }
  // Exact with no salient tokens: whole groups compressed, the window's rows in f16.
  double bytes_for_tokens(int64_t n) const override {
    const int64_t w = n < R_ + G_ ? n : R_ + (n - R_) % G_, c = n - w;
    const int d = geo_.head_dim;
    const double per_head = static_cast<double>(c / G_) * static_cast<double>(k_->block_bytes(d) + v_->block_bytes(d)) +
                            2.0 * static_cast<double>(w) * static_cast<double>(w_->block_bytes(d));
    return per_head * geo_.n_layers * geo_.n_kv_heads;
  }
  // main, window, salient, two staging segments (+ a window being rebuilt within a step).
  int max_streams_per_head() const override { return 12; }
  int error_block_tokens() const override { return G_; }
  // Max-abs bounds of the 1-bit / ternary codes (true but loose: a sign code is off by up
  // to max|x| of its block, and the FFT spreads a channel's error over the others).
  double error_bound() const override {
    return std::max({k_->error_bound(), v_->error_bound(), vs_->error_bound()}) + 0x1p-10;
  }
  double rms_error_bound() const override {
    return std::max(k_->rms_error_bound(), v_->rms_error_bound());
  }

 private:
  // Folded rows (whole groups, sequence order) to their class's staging segment, whose
  // whole groups go to the class's compressed segment. Text-only steps (no salient flag)
  // with an empty staging go straight to kMain.
  Status fold_rows(LayerEditor& ed, int h, const float* k, const float* v, int64_t rs, const uint8_t* flags,
                   int64_t n) const {
    const int d = ed.head_dim();
    const int64_t n_sal = std::count(flags, flags + n, uint8_t{1});
    if (n_sal == 0) return to_class(ed, h, false, k, v, rs, n);
    if (n_sal == n) return to_class(ed, h, true, k, v, rs, n);
    std::vector<float> ks[2], vs[2];
    for (int64_t r = 0; r < n; ++r) {
      const int c = flags[r] ? 1 : 0;
      ks[c].insert(ks[c].end(), k + r * rs, k + r * rs + d);
      vs[c].insert(vs[c].end(), v + r * rs, v + r * rs + d);
    }
    VLKV_RETURN_IF_ERROR(to_class(ed, h, false, ks[0].data(), vs[0].data(), d, n - n_sal));
    return to_class(ed, h, true, ks[1].data(), vs[1].data(), d, n_sal);
  }

  Status to_class(LayerEditor& ed, int h, bool salient, const float* k, const float* v, int64_t rs, int64_t n) const {
    const uint32_t target = salient ? kSalient : kMain;
    auto sink = [&](const float* kk, const float* vv, int64_t s, int64_t, int64_t m) -> Status {
      int seg = window_fold::find_segment(ed, h, target);
      if (seg < 0) seg = ed.add_segment(h, k_.get(), salient ? vs_.get() : v_.get(), target);
      return ed.append(h, seg, kk, vv, s, m);
    };
    return window_fold::stage(ed, h, salient ? kStageSalient : kStageMain, w_.get(), 0, G_, k, v, rs, n, sink)
        .status();
  }

  std::string spec_;
  std::shared_ptr<const Codec> k_, v_, vs_, w_;
  KvGeometry geo_;
  int G_ = 32;
  int64_t R_ = 128;
  double p_ = 0.2;
};

}  // namespace

VLKV_REGISTER_KV_METHOD(
    vidkv,
    MethodInfo{"vidkv",
               "VidKV: keys per-channel 2-bit/1-bit (+FFT) mixed over groups of g tokens, values ternary (1.58-bit) "
               "per channel, salient visual tokens' values 2-bit, f16 recent window (2.19 bits/element at d128)",
               {{"frac", "0.5", "share of key channels (largest range per group) kept at 2 bits"},
                {"fft", "real", "transform of the 1-bit key channels: none, real (half spectrum), complex (Re+Im, 2x)"},
                {"window", "128", "recent tokens kept in f16 (plus the unfinished group)"},
                {"p", "0.2", "salient visual tokens: top max(32, floor(N*p/32)*32) of a step's N visual tokens by "
                             "similarity to the text (needs the engine's visual_similarity; else none)"},
                {"g", "32", kBitPlaneGroupHelp},
                {"thr", "0.5", "ternary threshold as a fraction of mean|v| per channel (vfit mean, scale)"},
                {"vfit", "opt", "ternary values' codes and scale per channel and group: mean (the paper: threshold "
                                "thr*mean|v|, scale mean|v|; shrinks values ~25%), scale (the paper's codes, "
                                "least-squares scale), opt (least-squares threshold and scale)"}},
               [](const Spec& s, const KvGeometry& g) { return VidkvMethod::create(s, g); }});

}  // namespace vlkv
