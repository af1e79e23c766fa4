// Tiled code layouts of the integer KV codecs, shaped for vpdpbusd (AVX-512 VNNI, AVX-VNNI;
// on AVX2 the same quads feed vpmaddubsw, int_tile_kernels_avx2.h): the
// codes of 16 tokens x 16 channels (a tile, 32 * B bytes for B = 2, 4, 8) are laid out so
// that unpacking gives four vectors of 16 dword lanes, each lane holding 4 bytes that one
// vpdpbusd multiplies with a broadcast quad of 8-bit query or probability values:
//   key tiles   (lane = token,   quad = 4 channels): scores()     = sum over channels
//   value tiles (lane = channel, quad = 4 tokens):   accumulate() = sum over tokens
// so neither fused op gathers, transposes or widens to f32 before the dot product.
//
// Inside a tile, element e (0..15) of lane l (quad j = e / 4, member k = e % 4) is in
// byte 64 * (j / per) + 4 * l + k at bit B * (j % per), per = 8 / B codes per byte:
// B = 2: one 64-byte vector, quad j = bits 2j..2j+1 of every byte;
// B = 4: two vectors, quads 0/1 = low/high nibbles of the first, 2/3 of the second;
// B = 8: four vectors, one per quad.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "kv/codec.h"
#include "kv/codecs/view_prefetch.h"  // prefetch_lines / prefetch_bytes of the tile kernels
#include "kv/spec.h"
#include "vlkv/status.h"

namespace vlkv::intt {

constexpr int kTileTokens = 16;    // tokens per tile (and per block of a tiled per-token codec)
constexpr int kTileChannels = 16;  // channels per tile

// Geometry of a tiled block, as the fused kernels (int_kernels.h) read it.
struct KeyTileShape {
  int d = 0;
  int g = 0;           // per-token codec: channels per group; 0: per-channel block (G tokens)
  int meta_bytes = 0;  // bytes before the code tiles in a block
};
struct ValueTileShape {
  int d = 0;
  int g = 0;           // channels per group (per-token values)
  int meta_bytes = 0;
};

inline bool tileable_bits(int bits) { return bits == 2 || bits == 4 || bits == 8; }

// Most channels one f32 step of the 8-bit key-tile dots may span: their int32 sums of codes
// <= 255 times 15-bit query parts stay exact in f32 (512 * 255 * 128 < 2^24) and, as s16-word
// totals on AVX2, in int32 (512 * 255 * 16383 < 2^31). IntCodec dequantizes wider 8-bit pieces.
constexpr int kMaxDotChannels8 = 512;

// Whether a method should store a per-token codec in tiles (integer dots at every SIMD tier
// but scalar): 2/4/8-bit codes, whole 16-channel tiles inside each group, and for 8 bits
// groups within kMaxDotChannels8. CPU-independent, so the stored layout is the same everywhere.
inline bool tiles_pay(int bits, int head_dim, int64_t channel_group) {
  return (bits == 2 || bits == 4 || (bits == 8 && channel_group <= kMaxDotChannels8)) &&
         head_dim % kTileChannels == 0 && channel_group % kTileChannels == 0;
}

// The `dot` parameter of the int codecs and of the methods that pass it on: bits the tiled
// integer ops round their float inputs to (int_tile_kernels_avx512.h). By default 8 at 2-bit
// codes: that rounding is ~1% of the 2-bit codes' own error (KL vs the f16 cache within 2% of
// dot=16 on stories260K-hd32 and tinyvlm-shapes) and halves the integer work (attention 22-32%
// faster); 16 at 4 and 8 bits, where dot=8 adds 11-14% to the KL.
inline constexpr const char* kDotHelp =
    "integer dots on tiled 2/4/8-bit codes (every SIMD tier but scalar): 16 rounds queries to 15 bits and probabilities to 14 "
    "(within ~1e-3 of exact attention over the stored values), 8 to 8 and 7 bits (half the integer work, ~1e-2); "
    "auto: 8 for 2-bit codes (~1% of their own error), 16 for 4- and 8-bit codes";
inline int default_dot_bits(int code_bits) { return code_bits <= 2 ? 8 : 16; }
// The `dot` a spec names (8 or 16), or 0 when it names none (auto: default_dot_bits per codec).
inline Result<int> parse_dot_bits(const Spec& spec, const std::string& who) {
  const std::string dot = spec.get_string("dot", "auto");
  if (dot == "auto") return 0;
  if (dot == "8" || dot == "16") return std::stoi(dot);
  return invalid_argument("'" + who + "': dot=" + dot + " is not supported; valid: 8, 16, auto");
}
// ",dot=N" for a codec spec when the method's spec named one, else "" (the codec's default).
inline std::string dot_suffix(int dot) { return dot ? ",dot=" + std::to_string(dot) : ""; }

inline int64_t tile_bytes(int bits) { return 32LL * bits; }

// levels / m, the inverse rounding step of inputs whose max |value| is m; 0 when m is below
// 2^-100. Softmax weights far below the running max reach such m (a run of tokens 90 nats
// below the best one: p ~ 1e-40): levels / m would overflow to inf and p * inf turn the
// rounded codes (and the dot=8 residuals) into NaN. Rounded to 0 instead, such inputs change
// a dot by at most 64 * 2^-100 * 255 ~ 1e-26 in absolute terms.
constexpr float kMinRoundedMax = 0x1p-100f;  // inputs whose max is below this round to 0
inline float inverse_step(float levels, float m) { return m >= kMinRoundedMax ? levels / m : 0.0f; }

// accumulate rounds probabilities per run of kRunBlocks 16-token blocks (one step per 64 tokens).
// Each tier gathers a run's block pointers in its own loop: a shared helper (a struct or a
// function) cost the AVX2 kernel 3-10% more instructions (GCC 12 unrolled less).
constexpr int kRunBlocks = 4;

// Byte offset and bit shift of element e of lane l inside a tile.
inline void locate(int bits, int lane, int e, int* byte, int* shift) {
  const int per = 8 / bits, j = e / 4, k = e % 4;
  *byte = 64 * (j / per) + 4 * lane + k;
  *shift = bits * (j % per);
}

// codes: [16 tokens, ld] (channel c of token t at codes[t * ld + c0 + c]) -> one tile.
// key_lanes: lane = token, element = channel; else lane = channel, element = token.
inline void pack_tile(const uint8_t* codes, int64_t ld, int c0, int bits, bool key_lanes, uint8_t* tile) {
  for (int64_t i = 0; i < tile_bytes(bits); ++i) tile[i] = 0;
  for (int t = 0; t < kTileTokens; ++t)
    for (int c = 0; c < kTileChannels; ++c) {
      int byte, shift;
      locate(bits, key_lanes ? t : c, key_lanes ? c : t, &byte, &shift);
      tile[byte] = static_cast<uint8_t>(tile[byte] | (codes[t * ld + c0 + c] << shift));
    }
}

// Inverse of pack_tile.
inline void unpack_tile(const uint8_t* tile, int bits, bool key_lanes, uint8_t* codes, int64_t ld, int c0) {
  const int mask = (1 << bits) - 1;
  for (int t = 0; t < kTileTokens; ++t)
    for (int c = 0; c < kTileChannels; ++c) {
      int byte, shift;
      locate(bits, key_lanes ? t : c, key_lanes ? c : t, &byte, &shift);
      codes[t * ld + c0 + c] = static_cast<uint8_t>((tile[byte] >> shift) & mask);
    }
}

}  // namespace vlkv::intt
