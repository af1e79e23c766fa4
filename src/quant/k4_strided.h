// Q4_K and Q5_K decode matvec against 8-bit activations (WeightFormat::dot_q8_strided) at
// the x86 tiers, lanes = weight rows (8 per 256-bit vector): a row's sub-block sums are
// exact int32 (codes 0..15 or 0..31 times x, 32 terms), and per activation block b (one
// sub-block of 32) each row takes the prefill GEMM's steps (quant/q8_0_gemm.h) in f32,
//   acc = fma(f32(sum_j code_j x_j), (d * sc) * dx_b, acc)
//   acc = fma(-(dmin * m), dx_b * f32(sum_j x_j), acc)
// so decode equals prefill bit for bit, the one-row dot (dot_q8) is a strided call of one
// row, and a batched step's decode rows equal solo ones. Scales and minima are unpacked for
// 8 rows at once from the rows' 16-byte block heads (d, dmin, 12 scale bytes), transposed.
// Internal to q4_k.cpp / q5_k.cpp; kernels in k4_strided_x86.h, one file per tier.
#pragma once

#include <cstdint>

#include "quant/q8_activations.h"

namespace vlkv::quant::k4strided {

// out[r] = the dot of the weight row at base + r * stride with x, r < n_rows <= kLaneRows + 1
// (stride 0: one row). kQ5: Q5_K blocks (fifth bits), else Q4_K.
template <bool kQ5>
void strided_avx512vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                        float* out);
template <bool kQ5>
void strided_avx2vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                      float* out);
template <bool kQ5>
void strided_avx2(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out);

}  // namespace vlkv::quant::k4strided
