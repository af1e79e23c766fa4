// Exact prefill GEMM in f32: y[t][r] = sum_c w[r][c] * x[t][c] for any weight format, blocked
// for the caches. A panel of kPanelRows weight rows x kKc columns is dequantized once into an
// f32 panel laid out for the micro-kernel ([kPanelRows / nr][kc][nr]: nr consecutive weight
// rows interleaved per column) and reused by every token; the micro-kernel holds an mr x nr
// tile of y in registers (mr tokens, nr weight rows) and adds one outer product per column.
// Threads take (panel, token block) tasks. Every y element is one f32 multiply-add chain over
// c = 0, 1, ... in order (fused where the tier has FMA), whatever the token count, block or
// thread: a row's result never depends on the other rows of the call.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "base/thread_pool.h"
#include "kernels/matmul.h"

namespace vlkv {

// c[i * ldc + j] (+)= sum_{k<kc} a[i * lda + k] * b[k * nr + j] for i < M (the kernel's row
// count), j < nr; accumulate false: c is overwritten. b: the packed panel of nr weight rows.
using GemmF32Fn = void (*)(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc,
                           bool accumulate);

// One SIMD tier's micro-kernels: fns[m - 1] for m = 1..mr token rows, all nr weight rows wide;
// and the softmax pieces of the blocked attention (kernels/attention_f32.h) on its rows.
struct GemmF32Kernels {
  int mr = 0;  // token rows of the full tile (<= 16)
  int nr = 0;  // weight rows of a tile: the panel's interleave
  GemmF32Fn fns[16] = {};
  // max_i s[i] over n >= 1 values.
  float (*row_max)(const float* s, int64_t n) = nullptr;
  // s[i] = exp(s[i] * scale - shift) (the product rounded, then the difference, as ggml's
  // soft_max scales its logits first), returns their f32 sum. exp by the polynomial of
  // exp_poly.h (relative error < 2e-7 on the range; inputs below -87.3 give ~1e-38, not 0).
  float (*exp_sum)(float* s, int64_t n, float scale, float shift) = nullptr;
  // The weight panel's layout: panel[k * nr + j] = rows[j * ld + k] for k < kc, j < nr, with
  // 0 for rows j >= n_rows (n_rows <= nr). A copy: any tier gives the same panel.
  void (*pack)(const float* rows, int64_t ld, int n_rows, int64_t kc, int nr, float* panel) = nullptr;
};

// The scalar pack (GemmF32Kernels::pack), the default of tiers without their own.
void gemm_f32_pack_scalar(const float* rows, int64_t ld, int n_rows, int64_t kc, int nr, float* panel);

// The kernels of the current SIMD tier (scalar reference as the fallback). Thread-safe.
const GemmF32Kernels& gemm_f32_kernels();
// The tier variants (gemm_f32_x86.cpp, gemm_f32_arm.cpp).
extern const GemmF32Kernels kGemmF32Avx2, kGemmF32Avx512, kGemmF32Neon;

// y [n_tokens, w.n_rows] = x [n_tokens, w.n_cols] times w transposed, exact dequantization
// and f32 arithmetic (matmul's exact prefill path).
void gemm_f32(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);
// Several matrices of the same width times the same x (the Q, K, V projections; FFN gate and
// up), one task list over all their panels: one thread wake-up and one load-balancing tail
// instead of one per matrix. Each target's y equals gemm_f32(*w, x, n_tokens, y) bit for bit.
// At most 4 targets.
void gemm_f32_fused(std::span<const MatvecTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool);

// Fills fns[m - 1] with K<m>::fn for m = 1..MR.
template <int MR, int NR, template <int> class K, int... I>
constexpr GemmF32Kernels make_gemm_f32_table(decltype(GemmF32Kernels::row_max) row_max,
                                             decltype(GemmF32Kernels::exp_sum) exp_sum,
                                             decltype(GemmF32Kernels::pack) pack, std::integer_sequence<int, I...>) {
  GemmF32Kernels k;
  k.mr = MR;
  k.nr = NR;
  ((k.fns[I] = K<I + 1>::fn), ...);
  k.row_max = row_max;
  k.exp_sum = exp_sum;
  k.pack = pack;
  return k;
}
template <int MR, int NR, template <int> class K>
constexpr GemmF32Kernels make_gemm_f32_table(decltype(GemmF32Kernels::row_max) row_max,
                                             decltype(GemmF32Kernels::exp_sum) exp_sum,
                                             decltype(GemmF32Kernels::pack) pack = &gemm_f32_pack_scalar) {
  return make_gemm_f32_table<MR, NR, K>(row_max, exp_sum, pack, std::make_integer_sequence<int, MR>());
}

}  // namespace vlkv
