// Q8_0 weights times 8-bit activations for prefill (many activation rows): the micro-kernels
// of kernels/gemm_q8.cpp, one table (base/simd_dispatch.h), per ISA in q8_0_gemm_<isa>.cpp.
// Every variant takes the block steps of q8_0_lanes.h per (weight row, activation row):
//   acc = fma(f32(exact int32 block sum), dw_b * dx_b, acc), blocks in order,
// so a prefill row equals the decode dot (dot_q8 at that tier) bit for bit above scalar.
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
// Weight rows of one call, with their per-block terms computed once per tile and reused for
// every panel: bias = 128 * (sum of the block's 32 codes), the w . 128 that vpdpbusd on
// x + 128 adds; dw = the block's f16 scale as f32.
struct GemmWeightRows {
  const uint8_t* w = nullptr;  // row i's first block at w + i * row_bytes
  int64_t row_bytes = 0;
  int n_rows = 0;                 // 1 .. kGemmMaxWeightRows
  const int32_t* bias = nullptr;  // [n_rows][ld]
  const float* dw = nullptr;      // [n_rows][ld]
  int64_t ld = 0;
};

// acc[i * 16 + l] continues weight row i's chain of block steps with panel row l, over blocks
// [0, n_blocks) of w, codes, d and the bias/dw rows. acc [n_rows][16].
using GemmQ8Fn = void (*)(const GemmWeightRows& w, const uint32_t* codes, const float* d, int64_t n_blocks,
                          float* acc);

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

// The variant of the current tier (VLKV_SIMD and the tests' forced tiers apply).
const Q8_0GemmKernels& q8_0_gemm_kernels();

}  // namespace vlkv::quant
