// Block-format weights times 8-bit activations for prefill (many activation rows): the
// micro-kernels of kernels/gemm_q8.cpp, one table (base/simd_dispatch.h), per ISA in
// q8_0_gemm_<isa>.cpp. Activations are Q8_0 blocks of 32 (quant/q8_activations.h); a weight
// block is 32 int8 codes q with an f32 scale (or two, one per 16 codes) and, for formats with
// a minimum, an f32 offset o: w = dw * q + o. Every variant takes these steps per (weight row,
// activation row), blocks in order:
//   acc = fma(f32(exact int32 sum of q * x), dw_b * dx_b, acc)        (per half with two scales)
//   acc = fma(o_b, dx_b * f32(sum of the block's x codes), acc)       (formats with an offset)
// so every tier gives the same bits, and for Q8_0 blocks (read in place, one scale, no
// offset) a prefill row equals the decode dot (dot_q8 at that tier) bit for bit above scalar.
#pragma once

#include <cstdint>

namespace vlkv::quant {

// Activation rows per panel (one 512-bit vector of lanes) and weight rows per kernel call.
inline constexpr int kGemmPanelRows = 16;
inline constexpr int kGemmMaxWeightRows = 8;

// A panel: 16 activation rows rounded to Q8_0 blocks and interleaved so that one 64-byte
// vector holds codes 4k..4k+3 of block b of every row:
//   codes [n_blocks][8][16]: dword k of row l, as u8 codes + 128 (VNNI's unsigned operand);
//   d     [n_blocks][16]:    row l's block scale (0 for rows past the last: a padding row).
// xsum_d [n_blocks][16]: row l's dx_b * (sum of its 32 block codes), read only by weights
// with offsets.
struct GemmPanel {
  const uint32_t* codes = nullptr;
  const float* d = nullptr;
  const float* xsum_d = nullptr;
};

// Weight rows of one call, with their per-block terms computed once per tile and reused for
// every panel: bias = 128 * (sum of the group's codes), the w . 128 that vpdpbusd on x + 128
// adds; dw = the group's scale. A group is a block, or half a block when split.
struct GemmWeightRows {
  const uint8_t* w = nullptr;  // row i's block b: 32 int8 codes at w + i * row_bytes + b * block_stride + code_offset
  int64_t row_bytes = 0;
  int64_t block_stride = 34;  // Q8_0 blocks in place (f16 scale, 32 codes); 32 for unpacked codes
  int64_t code_offset = 2;
  int n_rows = 0;                 // 1 .. kGemmMaxWeightRows
  bool split = false;             // two scale groups per block: codes 0..15 and 16..31 (Q6_K)
  bool codes_0_63 = false;        // every code in [0, 63] (lets AVX2 skip the sign trick)
  const int32_t* bias = nullptr;  // [n_rows][ld]: group g of block b at b * (split ? 2 : 1) + g
  const float* dw = nullptr;      // [n_rows][ld]
  int64_t ld = 0;
  const float* offset = nullptr;  // [n_rows][ld_offset] per block, or nullptr: no offset term
  int64_t ld_offset = 0;
};

// acc[i * 16 + l] continues weight row i's chain of block steps with panel row l, over blocks
// [0, n_blocks) of w, the panel and the bias/dw/offset rows. acc [n_rows][16].
using GemmQ8Fn = void (*)(const GemmWeightRows& w, const GemmPanel& x, int64_t n_blocks, float* acc);

// The per-block terms of n_rows rows of n_blocks Q8_0 blocks (row i at blocks + i * row_bytes):
// bias[i * ld + b] = 128 * (sum of block b's codes), dw[i * ld + b] = its scale as f32.
using GemmBlockTermsFn = void (*)(const uint8_t* blocks, int64_t row_bytes, int n_rows, int64_t n_blocks,
                                  int32_t* bias, float* dw, int64_t ld);

struct Q8_0GemmKernels {
  GemmQ8Fn tile;
  GemmBlockTermsFn block_terms;
};
extern const Q8_0GemmKernels kQ8_0GemmScalar;
extern const Q8_0GemmKernels kQ8_0GemmAvx2;
extern const Q8_0GemmKernels kQ8_0GemmAvx2Vnni;
extern const Q8_0GemmKernels kQ8_0GemmAvx512Vnni;
extern const Q8_0GemmKernels kQ8_0GemmNeon;
extern const Q8_0GemmKernels kQ8_0GemmDotprod;

// The variant of the current tier (VLKV_SIMD and the tests' forced tiers apply).
const Q8_0GemmKernels& q8_0_gemm_kernels();

}  // namespace vlkv::quant
