// The uniform asymmetric integer codecs (intB, intBc, wht_intB, wht_intBc; B = 8, 4, 3, 2)
// built from typed parameters: methods fill an IntCodecParams and call make_int_codec; the
// registry (int_codec_registry.cpp) turns a user's spec string into the same struct. One
// function, validate_int_codec, checks a parameter set (and a head_dim, once it is known).
//
// Quantizer, error bound and code layouts: int_codec_core.h. Files by grouping and layout:
//   int_token_rows_codec.cpp   per token, one token per block (rows)
//   int_token_tiles_codec.cpp  per token, 16-token key or value tiles (layout=k|v)
//   int_channel_codec.cpp      per channel over G tokens (key tiles or rows, by head_dim)
//   wht_codec.*                the Walsh-Hadamard rotation, a wrapper around any of them
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "kv/codec.h"
#include "kv/spec.h"

namespace vlkv {

// Per-token code layout (per-channel codecs choose theirs from G, bits and head_dim).
enum class IntLayout { kRows, kKeyTiles, kValueTiles };

struct IntCodecParams {
  int bits = 4;         // 8, 4, 3 or 2
  int g = 32;           // per token: channels per group, a multiple of 8 in [0, 1024] (0 = head_dim)
  int G = 0;            // per channel: tokens per block in [1, 1024]; 0 = a per-token codec
  double clip = 1.0;    // clipping ratio in [0.05, 1]
  bool wht = false;     // rows Walsh-Hadamard rotated (head_dim a power of two <= 256)
  IntLayout layout = IntLayout::kRows;  // per token only; k and v need 2, 4 or 8 bits
  int dot_bits = 0;     // tiled integer dots: 8 or 16; 0 = intt::default_dot_bits(bits)
};

// clip as a spec names it ("%g": 6 significant digits), and the value that text parses
// to: methods build codecs from canonical_clip so that their canonical spec, parsed
// again (a KV file, a per-session method), rebuilds the same codec.
std::string clip_text(double clip);
double canonical_clip(double clip);

// "int4", "wht_int2c": the registered codec name these parameters build.
std::string int_codec_family(const IntCodecParams& p);
// Every check on the parameters, and on head_dim when it is > 0 (0: not known yet).
std::optional<SpecError> validate_int_codec(const IntCodecParams& p, int head_dim = 0);
// The codec (wrapped in the rotation when p.wht); InvalidArgument from validate_int_codec.
Result<std::shared_ptr<const Codec>> make_int_codec(const IntCodecParams& p);

}  // namespace vlkv
