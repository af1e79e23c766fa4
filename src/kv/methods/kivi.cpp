// Methods "kivi" (bits=2|4) and "kivi2" (bits 2): KIVI (Liu et al. 2024). Keys
// quantized per channel over groups of G tokens (codec intBc:G=g), values per token in
// groups of g channels (codec intB:g=g, in 16-token value tiles when g % 16 == 0), and a
// full-precision residual window of the most recent tokens.
//
// Per (layer, kv head) two segments, found by tag: the compressed one (kTagCompressed) and
// the window (kTagWindow, f16 or f32 rows), staged by window_fold.h. New tokens go to the
// window; when it holds at least residual + G tokens, the oldest whole groups of G are
// folded into the compressed segment so that
// residual <= window < residual + G tokens remain (window = n below residual + G tokens,
// else residual + (n - residual) mod G: a function of n alone). A fold re-encodes the
// window's remaining rows into a fresh window segment and drops the old one (LayerEditor
// has no "drop the front"); amortized that is residual / G row copies per token. A long
// prompt folds its bulk straight from the step's rows: the window never grows past
// residual + 2G rows. Attention is order-independent, so segment order does not matter;
// storage order is still sequence order (read_back returns the tokens in order).
//
// Accounting: bits_per_element() and bytes_per_token() are the steady-state compressed
// costs (window excluded: at 2 bits, g=32, d=128, 3.0 bits/element for K and for V);
// bytes_for_tokens(n) is exact for n tokens, window included (what the pool holds, less
// page tails) - the bench reports bytes actually held.
#include <algorithm>
#include <memory>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/codecs/int_codec.h"
#include "kv/codecs/int_tiles.h"
#include "kv/method_registry.h"
#include "kv/methods/window_fold.h"
#include "kv/methods/pair_bits.h"

namespace vlkv {
namespace {

constexpr uint32_t kTagCompressed = 0;
constexpr uint32_t kTagWindow = 1;

class KiviMethod final : public Method {
 public:
  static Result<std::unique_ptr<Method>> create(const std::string& name, const Spec& spec, const KvGeometry& geo) {
    int64_t bits = 2;
    if (spec.has("bits") || name == "kivi") {
      VLKV_ASSIGN_OR_RETURN(bits, spec.get_int("bits", 2, 2, 4));
      if (bits != 2 && bits != 4)
        return invalid_argument("'" + name + "': bits=" + std::to_string(bits) + " is not supported; valid: 2, 4");
    }
    VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", 32, 8, 1024));
    if (g % 8 != 0)
      return invalid_argument("'" + name + "': g=" + std::to_string(g) + " is not a multiple of 8; valid: 8, 16, 32, 64, 128");
    VLKV_ASSIGN_OR_RETURN(int64_t residual, spec.get_int("residual", 128, 0, 1 << 16));
    VLKV_ASSIGN_OR_RETURN(const int dot, intt::parse_dot_bits(spec, name));
    const std::string dot_param = intt::dot_suffix(dot);
    const std::string window = spec.get_string("window", "f16");
    if (window != "f16" && window != "f32")
      return invalid_argument("'" + name + "': window=" + window + " is not supported; valid: f16, f32");
    // Values: groups of g channels, the whole head when g does not divide head_dim and
    // was not given explicitly (e.g. head_dim 8).
    const int64_t gv = spec.has("g") || geo.head_dim % g == 0 ? g : geo.head_dim;
    const std::string b = std::to_string(bits);
    VLKV_ASSIGN_OR_RETURN(auto kc, make_int_codec({.bits = static_cast<int>(bits), .G = static_cast<int>(g), .dot_bits = dot}));
    // Values in 16-token tiles (integer accumulate on the codes, int_tiles.h) whenever the
    // folds (whole groups of g tokens) fill whole tiles; else one token per block.
    const bool v_tiles = intt::tiles_pay(static_cast<int>(bits), geo.head_dim, gv) && g % intt::kTileTokens == 0;
    VLKV_ASSIGN_OR_RETURN(auto vc, make_int_codec({.bits = static_cast<int>(bits), .g = static_cast<int>(gv),
                                                   .layout = v_tiles ? IntLayout::kValueTiles : IntLayout::kRows,
                                                   .dot_bits = dot}));
    VLKV_ASSIGN_OR_RETURN(auto wc, make_codec(window));
    for (const auto* c : {kc.get(), vc.get(), wc.get()})
      VLKV_RETURN_IF_ERROR(c->check_head_dim(geo.head_dim).with_context("KV method " + name));
    auto m = std::unique_ptr<KiviMethod>(new KiviMethod());
    m->spec_ = name + ":" + (name == "kivi" ? "bits=" + b + "," : "") + "g=" + std::to_string(g) +
               ",residual=" + std::to_string(residual) + ",window=" + window + dot_param;
    m->k_ = std::move(kc);
    m->v_ = std::move(vc);
    m->w_ = std::move(wc);
    m->geo_ = geo;
    m->G_ = static_cast<int>(g);
    m->R_ = residual;
    return std::unique_ptr<Method>(std::move(m));
  }

  const std::string& spec() const override { return spec_; }
  std::vector<const Codec*> codecs() const override { return {k_.get(), v_.get(), w_.get()}; }

  // New rows wait in the full-precision window; whole groups of G beyond R_ go to the
  // compressed segment (window_fold.h).
  Status store(const StoreInput& in, LayerEditor& ed) const override {
    return window_fold::store_staged(in, ed, kTagCompressed, k_.get(), v_.get(), kTagWindow, w_.get(), R_, G_);
  }

  double bits_per_element() const override { return pair_bits_per_element(*k_, *v_, geo_.head_dim); }
  double bytes_per_token() const override {
    const int d = geo_.head_dim;
    return static_cast<double>(geo_.n_layers) * geo_.n_kv_heads *
           (k_->bytes_per_token(d) + v_->bytes_per_token(d));
  }
  double bytes_for_tokens(int64_t n) const override {
    const int64_t w = window_tokens(n), c = n - w;
    const int d = geo_.head_dim;
    const double per_head = static_cast<double>(c / G_) * static_cast<double>(k_->block_bytes(d)) +
                            static_cast<double>(c) * v_->bytes_per_token(d) +
                            2.0 * static_cast<double>(w) * static_cast<double>(w_->block_bytes(d));
    return per_head * geo_.n_layers * geo_.n_kv_heads;
  }
  int max_streams_per_head() const override { return 4; }
  int error_block_tokens() const override { return G_; }
  // Keys per channel over G tokens (bound relative to the G-token block), values per
  // token; an f16 window adds its rounding (2^-11) to folded rows.
  double error_bound() const override {
    return std::max(k_->error_bound(), v_->error_bound()) + (w_->error_bound() > 0 ? 0x1p-10 : 0.0);
  }

  // Tokens in the window once n are stored (see the header comment).
  int64_t window_tokens(int64_t n) const { return n < R_ + G_ ? n : R_ + (n - R_) % G_; }

 private:
  std::string spec_;
  std::shared_ptr<const Codec> k_, v_, w_;
  KvGeometry geo_;
  int G_ = 32;
  int64_t R_ = 128;
};

std::vector<ParamInfo> kivi_params(bool with_bits) {
  std::vector<ParamInfo> p;
  if (with_bits) p.push_back({"bits", "2", "code bits of K and V: 2 or 4"});
  p.push_back({"g", "32", "group size: keys per channel over g tokens, values per token over g channels "
                          "(the whole head when g does not divide head_dim)"});
  p.push_back({"residual", "128", "recent tokens kept in full precision (the window holds residual..residual+g-1)"});
  p.push_back({"window", "f16", "storage of the residual window: f16 or f32"});
  p.push_back({"dot", "auto", intt::kDotHelp});
  return p;
}

}  // namespace

VLKV_REGISTER_KV_METHOD(kivi, MethodInfo{"kivi",
                                         "KIVI: keys per channel (groups of g tokens), values per token (groups of g "
                                         "channels), b-bit, full-precision residual window",
                                         kivi_params(true), [](const Spec& s, const KvGeometry& g) {
                                           return KiviMethod::create("kivi", s, g);
                                         }});
VLKV_REGISTER_KV_METHOD(kivi2, MethodInfo{"kivi2", "KIVI at 2 bits (= kivi:bits=2; 3.0 bits/element with g=32)",
                                          kivi_params(false), [](const Spec& s, const KvGeometry& g) {
                                            return KiviMethod::create("kivi2", s, g);
                                          }});

}  // namespace vlkv
