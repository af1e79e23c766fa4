// Dispatch table (base/simd_dispatch.h) of the integer codecs' fused ops on tiled code
// layouts (int_tiles.h): integer dot products on the stored codes in place, one variant per
// SIMD tier in its own file (int_kernels_<tier>.cpp). Internal to codecs/.
//
// Every variant rounds its float inputs the same way (int_tile_kernels_avx512.h states the
// rounding and its bounds): queries to 15 bits (dot=16) or 8 (dot=8), probabilities to 14
// or 7, so IntCodec::fused_rounding() is one declaration for every tier. The scalar tier
// has no entries: IntCodec then dequantizes (its reference path).
#pragma once

#include <cstdint>

#include "kv/codec.h"
#include "kv/codecs/int_tiles.h"

namespace vlkv::intk {

struct IntTileKernels {
  // logits[r * ld + t] = scale * q_r . k_t over a view of key-tile blocks.
  using Scores = void (*)(const float* q, int n_q, const SegmentView& seg, const intt::KeyTileShape& sh, float scale,
                          float* logits, int64_t ld);
  // out[r] += sum_t p[r * ld + t] v_t over a view of value-tile blocks (p >= 0).
  using Accumulate = void (*)(const float* p, int64_t ld, int n_q, const SegmentView& seg,
                              const intt::ValueTileShape& sh, float* out);
  // [bits: 0 = 2, 1 = 4, 2 = 8][dot: 0 = 8, 1 = 16]; null: no integer kernel at this tier.
  Scores scores[3][2] = {};
  Accumulate accumulate[3][2] = {};

  static int bits_index(int bits) { return bits == 2 ? 0 : bits == 4 ? 1 : bits == 8 ? 2 : -1; }
  Scores scores_for(int bits, int dot_bits) const {
    const int i = bits_index(bits);
    return i >= 0 ? scores[i][dot_bits == 16] : nullptr;
  }
  Accumulate accumulate_for(int bits, int dot_bits) const {
    const int i = bits_index(bits);
    return i >= 0 ? accumulate[i][dot_bits == 16] : nullptr;
  }
};

extern const IntTileKernels kIntTileKernelsAvx2;
extern const IntTileKernels kIntTileKernelsAvx2Vnni;
extern const IntTileKernels kIntTileKernelsAvx512Vnni;
extern const IntTileKernels kIntTileKernelsNeon;     // int_kernels_arm.cpp
extern const IntTileKernels kIntTileKernelsDotprod;  // int_kernels_dotprod.cpp (i8mm: the same)

// The variant of the current tier.
const IntTileKernels& int_tile_kernels();

}  // namespace vlkv::intk
