// The integer codecs by name (intB, intBc, wht_intB, wht_intBc for B in {8, 4, 3, 2}): a
// user's spec string becomes the IntCodecParams a method would build (int_codec.h).
//
//   spec                 block (tokens)  group                      bits/elem (d = head_dim)
//   intB:g=32,clip=1     1 token         g channels of the token    B + 32/g
//   intBc:G=32,clip=1    G tokens        one channel over G tokens  B + 32/G   (KIVI keys)
//   wht_intB / wht_intBc same, of the rows rotated by the normalized WHT over head_dim
//
// g = 0 means g = head_dim; g must divide head_dim; head_dim must be a multiple of 8 and,
// for wht_*, a power of two <= 256. At head_dim 128: int8 g32 9.0, int4 g32 5.0, g64 4.5,
// g128 4.25, int3 g32 4.0, int2 g32 3.0; int2c G32 3.0, int4c G32 5.0.
#include "kv/codec_registry.h"
#include "kv/codecs/int_codec.h"
#include "kv/codecs/int_tiles.h"

namespace vlkv {
namespace {

Result<IntCodecParams> int_params_from_spec(const Spec& spec, const std::string& name, int bits, bool per_channel,
                                            bool rot) {
  IntCodecParams p;
  p.bits = bits;
  p.wht = rot;
  if (per_channel) {
    VLKV_ASSIGN_OR_RETURN(int64_t G, spec.get_int("G", 32, 1, 1024));
    p.G = static_cast<int>(G);
  } else {
    VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", 32, 0, 1024));
    p.g = static_cast<int>(g);
    const std::string layout = spec.get_string("layout", "rows");
    if (layout == "k") p.layout = IntLayout::kKeyTiles;
    else if (layout == "v") p.layout = IntLayout::kValueTiles;
    else if (layout != "rows")
      return invalid_argument("'" + name + "': layout=" + layout + " is not supported; valid: rows, k, v");
  }
  VLKV_ASSIGN_OR_RETURN(p.clip, spec.get_double("clip", 1.0, 0.05, 1.0));
  VLKV_ASSIGN_OR_RETURN(p.dot_bits, intt::parse_dot_bits(spec, name));
  return p;
}

bool register_int_codecs() {
  for (int bits : {8, 4, 3, 2})
    for (bool per_channel : {false, true})
      for (bool rot : {false, true}) {
        const std::string name = std::string(rot ? "wht_" : "") + "int" + std::to_string(bits) + (per_channel ? "c" : "");
        std::vector<ParamInfo> params;
        if (per_channel) params.push_back({"G", "32", "tokens per block (per-channel scale/min over G tokens), 1..1024"});
        else {
          params.push_back({"g", "32", "channels per group (must divide head_dim); 0 = head_dim"});
          params.push_back({"layout", "rows", "rows (1 token per block) | k | v: blocks of 16 tokens in tiles for 8-bit "
                                               "VNNI scores (k) or accumulate (v); bits 2, 4, 8, head_dim % 16 == 0"});
        }
        params.push_back({"clip", "1", "clipping ratio in (0, 1]: the group's range shrunk around its centre"});
        params.push_back({"dot", "auto", intt::kDotHelp});
        std::string help = std::to_string(bits) + "-bit uniform asymmetric, f16 scale+min per " +
                           (per_channel ? "channel over G tokens" : "group of g channels of a token") +
                           (rot ? ", rows Walsh-Hadamard rotated" : "");
        register_codec(CodecInfo{name, help, params, [=](const Spec& spec) -> Result<std::shared_ptr<const Codec>> {
                                   VLKV_ASSIGN_OR_RETURN(IntCodecParams p,
                                                         int_params_from_spec(spec, name, bits, per_channel, rot));
                                   return make_int_codec(p);
                                 }});
      }
  return true;
}

[[maybe_unused]] const bool g_int_codecs_registered = register_int_codecs();

}  // namespace
}  // namespace vlkv
