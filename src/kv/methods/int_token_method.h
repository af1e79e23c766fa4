// Shared by the per-token integer methods ("int8", "int4", ...): K and V with the per-token
// integer codec intB (int_codec.h) - f16 scale + min per group of g channels, optional
// clipping and Walsh-Hadamard rotation.
//
// At 2, 4 and 8 bits (head_dim and g multiples of 16, intt::tiles_pay) the codes live in
// 16-token tiles (keys in key tiles, values in value tiles: integer dots on the codes in
// place at every SIMD tier but scalar, int_tiles.h); the
// newest < 16 tokens wait in an f16 staging segment until their tile fills (window_fold.h
// with keep = 0). Otherwise one segment stores every token as it comes (rows layout).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/codecs/int_codec.h"
#include "kv/codecs/int_tiles.h"
#include "kv/method_registry.h"
#include "kv/methods/single_codec.h"
#include "kv/methods/window_fold.h"
#include "kv/methods/pair_bits.h"

namespace vlkv {

// Default group: 32 channels, or the whole head when 32 does not divide head_dim
// (e.g. head_dim 8 or 80). An explicit g is taken as given and refused when it does
// not divide head_dim.
inline int default_channel_group(int head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }

class TiledIntTokenMethod final : public Method {
 public:
  static constexpr uint32_t kTagTiles = 0, kTagStaging = 1;
  static constexpr int kTile = 16;

  static Result<std::unique_ptr<Method>> create(const std::string& spec, IntCodecParams codec, const KvGeometry& geo) {
    auto m = std::unique_ptr<TiledIntTokenMethod>(new TiledIntTokenMethod());
    codec.layout = IntLayout::kKeyTiles;
    VLKV_ASSIGN_OR_RETURN(m->k_, make_int_codec(codec));
    codec.layout = IntLayout::kValueTiles;
    VLKV_ASSIGN_OR_RETURN(m->v_, make_int_codec(codec));
    VLKV_ASSIGN_OR_RETURN(m->w_, make_codec("f16"));
    for (const auto* c : {m->k_.get(), m->v_.get(), m->w_.get()}) VLKV_RETURN_IF_ERROR(c->check_head_dim(geo.head_dim));
    m->spec_ = spec;
    m->geo_ = geo;
    return std::unique_ptr<Method>(std::move(m));
  }

  const std::string& spec() const override { return spec_; }
  std::vector<const Codec*> codecs() const override { return {k_.get(), v_.get(), w_.get()}; }

  Status store(const StoreInput& in, LayerEditor& ed) const override {
    return window_fold::store_staged(in, ed, kTagTiles, k_.get(), v_.get(), kTagStaging, w_.get(), /*keep=*/0, kTile);
  }

  double bits_per_element() const override { return pair_bits_per_element(*k_, *v_, geo_.head_dim); }
  double bytes_per_token() const override {
    return static_cast<double>(geo_.n_layers) * geo_.n_kv_heads * tile_bytes_per_token();
  }
  double bytes_for_tokens(int64_t n) const override {
    const int64_t staged = n % kTile;
    const double per_head = static_cast<double>(n - staged) * tile_bytes_per_token() +
                            2.0 * static_cast<double>(staged) * static_cast<double>(w_->block_bytes(geo_.head_dim));
    return per_head * geo_.n_layers * geo_.n_kv_heads;
  }
  int max_streams_per_head() const override { return 4; }
  // Staged rows are f16 (2^-11 relative), far inside the codec's bound.
  double error_bound() const override { return std::max(k_->error_bound(), 0x1p-10); }

 private:
  TiledIntTokenMethod() = default;
  double tile_bytes_per_token() const { return k_->bytes_per_token(geo_.head_dim) + v_->bytes_per_token(geo_.head_dim); }

  std::string spec_;
  std::shared_ptr<const Codec> k_, v_, w_;
  KvGeometry geo_;
};

inline MethodInfo int_token_method_info(int bits) {
  const std::string name = "int" + std::to_string(bits);
  MethodInfo info;
  info.name = name;
  info.help = std::to_string(bits) + "-bit uniform asymmetric per token, f16 scale+min per group of g channels (" +
              std::to_string(bits + 1) + " bits/element at g=32)";
  info.params = {
      {"g", "32", "channels per group: a multiple of 8 dividing head_dim, or 0 = head_dim (default 32, or head_dim "
                  "when 32 does not divide it)"},
      {"clip", "1", "clipping ratio in [0.05, 1]: each group's range shrunk around its centre"},
      {"wht", "0", "1 = rotate K and V rows by the normalized Walsh-Hadamard transform (head_dim 2^k)"},
      {"dot", "auto", intt::kDotHelp},
  };
  info.create = [name, bits](const Spec& spec, const KvGeometry& geo) -> Result<std::unique_ptr<Method>> {
    VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", default_channel_group(geo.head_dim), 0, 1024));
    if (g % 8 != 0)
      return invalid_argument("'" + name + "': g=" + std::to_string(g) +
                              " is not a valid group; valid: 0 (head_dim) or a multiple of 8 dividing head_dim " +
                              std::to_string(geo.head_dim));
    VLKV_ASSIGN_OR_RETURN(double clip, spec.get_double("clip", 1.0, 0.05, 1.0));
    VLKV_ASSIGN_OR_RETURN(int64_t wht, spec.get_int("wht", 0, 0, 1));
    VLKV_ASSIGN_OR_RETURN(const int dot, intt::parse_dot_bits(spec, name));
    const IntCodecParams codec{.bits = bits, .g = static_cast<int>(g), .clip = canonical_clip(clip), .wht = wht != 0};
    const std::string method_spec = name + ":g=" + std::to_string(g) + ",clip=" + clip_text(clip) +
                                    ",wht=" + std::to_string(wht) + intt::dot_suffix(dot);
    const int64_t group = g == 0 ? geo.head_dim : g;
    if (intt::tiles_pay(bits, geo.head_dim, group)) {
      IntCodecParams tiled = codec;
      tiled.dot_bits = dot;
      return TiledIntTokenMethod::create(method_spec, tiled, geo);
    }
    return SingleCodecMethod::create(method_spec, make_int_codec(codec), geo);
  };
  return info;
}

}  // namespace vlkv
