// Shared by methods "int8" and "int4": every token of every layer in one segment, K
// and V with the per-token integer codec intB (int_codec.cpp) - f16 scale + min per
// group of g channels, optional clipping and Walsh-Hadamard rotation.
#pragma once

#include <cstdio>
#include <string>

#include "kv/method_registry.h"
#include "kv/methods/single_codec.h"

namespace vlkv {

// Default group: 32 channels, or the whole head when 32 does not divide head_dim
// (e.g. head_dim 8 or 80). An explicit g is taken as given and refused when it does
// not divide head_dim.
inline int default_channel_group(int head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }

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
  };
  info.create = [name](const Spec& spec, const KvGeometry& geo) -> Result<std::unique_ptr<Method>> {
    VLKV_ASSIGN_OR_RETURN(int64_t g, spec.get_int("g", default_channel_group(geo.head_dim), 0, 1024));
    if (g % 8 != 0)
      return invalid_argument("'" + name + "': g=" + std::to_string(g) +
                              " is not a valid group; valid: 0 (head_dim) or a multiple of 8 dividing head_dim " +
                              std::to_string(geo.head_dim));
    VLKV_ASSIGN_OR_RETURN(double clip, spec.get_double("clip", 1.0, 0.05, 1.0));
    VLKV_ASSIGN_OR_RETURN(int64_t wht, spec.get_int("wht", 0, 0, 1));
    char clip_text[32];
    std::snprintf(clip_text, sizeof clip_text, "%g", clip);
    const std::string params = ":g=" + std::to_string(g) + ",clip=" + clip_text;
    return SingleCodecMethod::create(name + params + ",wht=" + std::to_string(wht),
                                     std::string(wht ? "wht_" : "") + name + params, geo);
  };
  return info;
}

}  // namespace vlkv
