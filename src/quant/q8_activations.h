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
  std::vector<float> xsum_d;      // [n / 32] d * f32(sum of the block's codes): the offset formats'
                                  // minimum term, once per row instead of once per weight row
};

// Activation rows that share one pass over the weights (WeightFormat::dot_q8_lanes): up to
// kLaneRows rows interleaved so that one 64-byte vector holds 4 codes of each of 16 lanes.
// Lane l < n_rows is row l; the other lanes (lane 15 always) hold x = 0, whose dot with a
// weight block is w . 128: the bias of VNNI's unsigned operand, subtracted in every lane.
inline constexpr int kLaneRows = 15;
struct Q8Lanes {
  int64_t n = 0;     // elements per row, a multiple of 32
  int n_rows = 0;
  const Q8Activations* rows[kLaneRows] = {};  // the source rows (the kernels' fallback reads them)
  std::vector<uint32_t> codes;  // [n / 32][8][16]: dword k of block b of lane l, as u8 codes + 128
  std::vector<float> d;         // [n / 32][16]: lane l's block scale (0 past n_rows)
};

// Rounds x[n] (n a multiple of 32) into out, reusing out's storage.
void quantize_activations_q8(const float* x, int64_t n, Q8Activations& out);

// Interleaves rows[0, n_rows) (1 <= n_rows <= kLaneRows, equal n) into out, reusing its
// storage: once per group of a batched step's decode rows, not once per weight row.
void interleave_q8_lanes(const Q8Activations* const* rows, int n_rows, Q8Lanes& out);

}  // namespace vlkv
