// Dispatch table (base/simd_dispatch.h) of the integer codecs' kernels on the rows layout
// (one token's codes densely packed, int_pack.h): dequantizing 16-code units to floats, the
// f16 -> f32 metadata of a per-channel block, and AVX-512 VNNI scores on the codes in place.
// One variant per SIMD tier in its own file (int_row_kernels_<tier>.cpp); the scalar variant
// is the reference. Internal to codecs/.
#pragma once

#include <cstdint>

#include "kv/codec.h"

namespace vlkv::intk {

// Where one token row's codes and scale/min live. Per-token codecs broadcast group values
// (f16, unaligned); per-channel codecs pass the block's [d] float arrays.
struct IntRowMeta {
  const uint8_t* codes = nullptr;    // packed row
  const uint8_t* scale_h = nullptr;  // per token: [n_groups] f16
  const uint8_t* min_h = nullptr;
  int g = 0;                         // per token: channels per group
  const float* scale_c = nullptr;    // per channel: [d] floats (else null)
  const float* min_c = nullptr;
};

// The rows layout of a codec, for scores on the codes in place.
struct IntRowShape {
  int d = 0;   // head_dim, a multiple of 16
  int G = 0;   // per channel: tokens per block (block = [d] f16 scales, [d] f16 mins, G code rows); 0 = per token
  int ng = 0;  // per token: groups of d / ng channels (a multiple of 16); block = [ng] f16 scales, [ng] mins, codes
};

struct IntRowKernels {
  // out[d] = fma(code_i, scale_i, min_i) of one row of B-bit codes. The SIMD variants need
  // every 16-code unit inside one group: d % 16 == 0 and (per channel or g % 16 == 0);
  // callers take the scalar variant's entry otherwise. Same values at every tier (same fma).
  using Dequantize = void (*)(const IntRowMeta& m, int d, float* out);
  // out[d] = the f16 values at h (unaligned) as floats; d % 8 == 0.
  using HalvesToFloats = void (*)(const uint8_t* h, int d, float* out);
  // logits[r * ld + t] = scale * q_r . k_t over a view of rows-layout blocks of B-bit codes,
  // queries rounded to 24 bits per 16-channel unit (int_kernels_avx512.h states the bound).
  // Needs shape.d % 16 == 0 and seg.block_bytes < 2^26 (32-bit gather offsets).
  using Scores = void (*)(const float* q, int n_q, const SegmentView& seg, const IntRowShape& shape, float scale,
                          float* logits, int64_t ld);

  Dequantize dequantize[4] = {};  // [bits: 0 = 2, 1 = 3, 2 = 4, 3 = 8]
  HalvesToFloats halves_to_floats = nullptr;
  Scores scores[2] = {};  // [bits: 0 = 2, 1 = 4]; null: no kernel at this tier (the codec dequantizes)

  static int bits_index(int bits) { return bits == 2 ? 0 : bits == 3 ? 1 : bits == 4 ? 2 : 3; }
  Dequantize dequantize_for(int bits) const { return dequantize[bits_index(bits)]; }
  Scores scores_for(int bits) const { return bits == 2 ? scores[0] : bits == 4 ? scores[1] : nullptr; }
};

extern const IntRowKernels kIntRowKernelsScalar;
extern const IntRowKernels kIntRowKernelsAvx2;
extern const IntRowKernels kIntRowKernelsAvx512;
extern const IntRowKernels kIntRowKernelsAvx512Vnni;
extern const IntRowKernels kIntRowKernelsNeon;  // int_row_kernels_arm.cpp (every ARM64 tier)

// The variant of the current tier.
const IntRowKernels& int_row_kernels();

}  // namespace vlkv::intk
