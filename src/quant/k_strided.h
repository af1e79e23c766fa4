// Q4_K, Q5_K and Q6_K decode matvec against 8-bit activations (WeightFormat::dot_q8_strided)
// at the x86 tiers, lanes = weight rows (8 per 256-bit vector): a row's sums over a scale
// group are exact int32, and per activation block b (32 weights) each row takes the prefill
// GEMM's steps (quant/q8_0_gemm.h) in f32. Q4_K / Q5_K (codes 0..15 / 0..31, one sub-block):
//   acc = fma(f32(sum_j code_j x_j), (d * sc) * dx_b, acc)
//   acc = fma(-(dmin * m), dx_b * f32(sum_j x_j), acc)
// Q6_K (codes -32..31, two scale groups of 16): for each half g in order
//   acc = fma(f32(sum_{j in g} code_j x_j), (d * sc_g) * dx_b, acc)
// So decode equals prefill bit for bit, the one-row dot (dot_q8) is a strided call of one
// row, and a batched step's decode rows equal solo ones. Scales (and minima) are unpacked for
// 8 rows at once from the rows' 16 scale bytes, transposed.
// Internal to the K-quants; kernels in k_strided_x86.h, compiled once per tier in k_quant_<tier>.cpp.
#pragma once

#include <cstdint>

#include "quant/q8_activations.h"

namespace vlkv::quant::kstrided {

enum class KFormat { kQ4_K, kQ5_K, kQ6_K };

// out[r] = the dot of the weight row at base + r * stride with x, r < n_rows <= kLaneRows + 1
// (stride 0: one row), for weight rows of format F.
template <KFormat F>
void strided_avx512vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                        float* out);
template <KFormat F>
void strided_avx2vnni(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n,
                      float* out);
template <KFormat F>
void strided_avx2(const uint8_t* base, int64_t stride, int n_rows, const Q8Activations& x, int64_t n, float* out);

// out[r] = the dot of row r of an 8-row packed group (quant/k_packed.h) with x, r < 8, bit for
// bit the strided kernels' (k_packed_x86.h).
template <KFormat F>
void packed8_avx512vnni(const void* group, const Q8Activations& x, int64_t n, float* out);
template <KFormat F>
void packed8_avx2vnni(const void* group, const Q8Activations& x, int64_t n, float* out);
template <KFormat F>
void packed8_avx2(const void* group, const Q8Activations& x, int64_t n, float* out);

}  // namespace vlkv::quant::kstrided
