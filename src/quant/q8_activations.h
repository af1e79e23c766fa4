// Activations rounded to 8-bit blocks of 32 (the Q8_0 format's rounding: d = amax/127
// stored as f16, codes round(x/d)), as llama.cpp's CPU matmul rounds them before
// integer dot products. Lets quantized weights use int8 multiply-adds (VNNI) at decode.
#pragma once

#include <cstdint>
#include <vector>

namespace vlkv {

struct Q8Activations {
  int64_t n = 0;                  // elements, a multiple of 32
  std::vector<int8_t> q;          // [n] codes
  std::vector<float> d;           // [n / 32] scales (f16-rounded, as stored by Q8_0)
  std::vector<int32_t> half_sum;  // [n / 16] sum of the codes of each 16 (for formats with offsets)
  // Operands of WeightFormat::dot_q8_tile, set by prepare_q8_tile_operands (else empty):
  std::vector<uint8_t> biased;    // [n] q + 128 (q ^ 0x80): VNNI's unsigned operand
  std::vector<float> pair_d;      // [n / 64, 16] the scales of blocks 2i, 2i + 1, each over 8 lanes
};

// Rounds x[n] (n a multiple of 32) into out, reusing out's storage.
void quantize_activations_q8(const float* x, int64_t n, Q8Activations& out);

// Fills x.biased and x.pair_d from x.q and x.d (n a multiple of 64; else they stay empty):
// done once per activation row of a batched step, not once per weight row.
void prepare_q8_tile_operands(Q8Activations& x);

}  // namespace vlkv
