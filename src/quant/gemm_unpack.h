// Block-format weights unpacked for the prefill GEMM (q8_0_gemm.h): per 32 weights, 32 int8
// codes, an f32 scale (two, one per 16 codes, for Q6_K's 16-element sub-blocks) and, for
// formats with a minimum, an f32 offset: w = scale * code + offset is the format's reference
// dequantization exactly (every scale * code product here is exact or rounds as the reference's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf_types.h"

namespace vlkv::quant {

struct GemmUnpackFormat {
  int64_t block_elems = 0;  // weights per format block (32, or 256 for K-quants)
  size_t block_bytes = 0;
  bool split = false;   // two scale groups per 32 weights (codes 0..15, 16..31)
  bool offset = false;  // w = scale * code + offset
  bool codes_0_63 = false;  // every code in [0, 63]
  // Unpacks n_blocks format blocks at src (n = n_blocks * block_elems weights) into
  // q [n] codes; per scale group (n / 32 * (split ? 2 : 1) of them) dw its scale and bias
  // 128 * (sum of its codes); with offset, off [n / 32] per 32 weights.
  void (*unpack)(const uint8_t* src, int64_t n_blocks, int8_t* q, float* dw, int32_t* bias, float* off);
};

// The unpacker of format t: Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; nullptr for the others
// (Q8_0 and Q4_0 take the GEMM in Q8_0 blocks, the rest no GEMM).
const GemmUnpackFormat* find_gemm_unpack(GgmlType t);

}  // namespace vlkv::quant
