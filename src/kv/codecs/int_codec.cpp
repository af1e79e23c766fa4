// make_int_codec and the one validation of IntCodecParams (int_codec.h).
#include "kv/codecs/int_codec.h"

#include <cstdio>
#include <cstdlib>

#include "kv/codecs/int_codec_layouts.h"
#include "kv/codecs/int_tiles.h"
#include "kv/codecs/wht.h"
#include "kv/codecs/wht_codec.h"

namespace vlkv {

std::string clip_text(double clip) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", clip);
  return text;
}
double canonical_clip(double clip) { return std::strtod(clip_text(clip).c_str(), nullptr); }

std::string int_codec_family(const IntCodecParams& p) {
  return std::string(p.wht ? "wht_" : "") + "int" + std::to_string(p.bits) + (p.G ? "c" : "");
}

std::optional<SpecError> validate_int_codec(const IntCodecParams& p, int d) {
  const std::string who = int_codec_family(p);
  auto bad = [&who](const std::string& m) { return SpecError{SpecErrorKind::kBadValue, "'" + who + "': " + m}; };
  const char* layout = p.layout == IntLayout::kKeyTiles ? "k" : p.layout == IntLayout::kValueTiles ? "v" : "rows";
  if (p.bits != 2 && p.bits != 3 && p.bits != 4 && p.bits != 8)
    return bad("bits=" + std::to_string(p.bits) + " is not supported; valid: 2, 3, 4, 8");
  if (p.G < 0 || p.G > 1024) return bad("G=" + std::to_string(p.G) + " is not an integer in [1, 1024]");
  if (p.G) {
    if (p.layout != IntLayout::kRows)
      return bad(std::string("layout=") + layout + " applies to per-token codecs only");
  } else {
    if (p.g < 0 || p.g > 1024) return bad("g=" + std::to_string(p.g) + " is not an integer in [0, 1024]");
    if (p.g % 8 != 0)
      return bad("g=" + std::to_string(p.g) + " must be a multiple of 8 (e.g. 32, 64, 128) or 0 for head_dim");
    if (p.layout != IntLayout::kRows && !intt::tileable_bits(p.bits))
      return bad(std::string("layout=") + layout + " needs 2, 4 or 8 bits");
  }
  if (!(p.clip >= 0.05 && p.clip <= 1.0)) return bad("clip=" + clip_text(p.clip) + " is not a number in [0.05, 1]");
  if (p.dot_bits != 0 && p.dot_bits != 8 && p.dot_bits != 16)
    return bad("dot=" + std::to_string(p.dot_bits) + " is not supported; valid: 8, 16, auto");
  if (d == 0) return std::nullopt;

  auto head_dim = [&who](const std::string& m) { return SpecError{SpecErrorKind::kHeadDim, who + ": " + m}; };
  if (d < 0 || d % 8 != 0) return head_dim("head_dim " + std::to_string(d) + " is not a positive multiple of 8");
  if (!p.G && p.g != 0 && d % p.g != 0)
    return head_dim("group size " + std::to_string(p.g) + " does not divide head_dim " + std::to_string(d) +
                    " (choose g among the divisors of head_dim, or g=0 for the whole head)");
  if (p.layout != IntLayout::kRows && d % intt::kTileChannels != 0)
    return head_dim("layout=k|v needs head_dim a multiple of 16, got " + std::to_string(d) +
                    " (use the default rows layout)");
  if (p.wht && (!is_power_of_two(d) || d > kMaxWhtHeadDim))
    return head_dim("the Walsh-Hadamard rotation needs head_dim a power of two <= " + std::to_string(kMaxWhtHeadDim) +
                    ", got " + std::to_string(d));
  if (d > 1024) return head_dim("head_dim " + std::to_string(d) + " > 1024");
  return std::nullopt;
}

Result<std::shared_ptr<const Codec>> make_int_codec(const IntCodecParams& p) {
  if (std::optional<SpecError> e = validate_int_codec(p)) return e->status();
  std::shared_ptr<const Codec> codec = p.G                           ? intc::make_int_channel_codec(p)
                                       : p.layout == IntLayout::kRows ? intc::make_int_token_rows_codec(p)
                                                                      : intc::make_int_token_tiles_codec(p);
  if (p.wht) codec = make_wht_codec(std::move(codec));
  return codec;
}

}  // namespace vlkv
