// Q8_0 dots with 8-bit activations at every SIMD tier above scalar (AVX-512 VNNI, AVX-VNNI, AVX2;
// AVX-512 without VNNI runs the AVX2 kernels), in one block order for every path: per (weight
// row, activation row), in f32,
//   acc = 0; for each block b in order: acc = fma(f32(exact int32 sum_j w_bj x_bj), dw_b * dx_b, acc)
// (|block sum| <= 32 * 128 * 127 < 2^24, so its f32 is exact). The single dot, the decode
// matvec (strided: lanes = weight rows) and the batched GEMM (lanes: lanes = activation rows,
// Q8Lanes) all take these steps, so a sequence's logits do not depend on what else is in its
// batch. The float work is one convert + FMA per block for a whole vector of rows, where a dot
// per pair spends it per block. VNNI's unsigned operand is x + 128 (x ^ 0x80): each block sum
// subtracts w . 128 (strided: one more vpdpbusd; lanes: lane 15, which holds x = 0).
// Internal to q8_0.cpp; kernels in q8_0_lanes_avx512vnni.cpp and q8_0_lanes_x86.h (256-bit).
#pragma once

#include <cstdint>

#include "quant/q8_activations.h"
#include "quant/quant_internal.h"  // load_u16/u32; GCC 12's false -Wmaybe-uninitialized on AVX-512

namespace vlkv::quant::q8lanes {

constexpr int kLanes = kLaneRows + 1;  // Q8Lanes' lanes, and the rows of one strided call
constexpr int64_t kQk = 32;            // Q8_0 block: f16 scale, 32 signed codes
constexpr int64_t kBytes = 34;
// How far ahead of the block being read the strided kernels prefetch each of their 16 rows:
// without it the hardware prefetchers keep too few of the interleaved row streams in flight
// (quant_dot_bench dot_q8_strided/q8_0/*/dram, 1 thread: AVX2 16-17 GB/s without, 21-26 at 256
// bytes, 128 and 512 both lower; AVX-512 VNNI 17.2-18.5 -> 27.4-29.1 at 256, 20-25 at 512/1024).
constexpr int64_t kPrefetchBytes = 256;

// out[r] = the dot of the weight row at base + r * stride with x, r < n_rows <= kLanes
// (stride 0: one row; past n_rows the lanes repeat row 0).
void strided_avx512vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                        float* out);
void strided_avx2vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out);
void strided_avx2(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out);
// out[i * kLanes + l] = the dot of rows[i] (i < n_rows <= kMaxLaneWeightRows) with lane l of x.
void lanes_avx512vnni(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out);
void lanes_avx2vnni(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out);
void lanes_avx2(const void* const* rows, int n_rows, const Q8Lanes& x, int64_t n, float* out);

}  // namespace vlkv::quant::q8lanes
