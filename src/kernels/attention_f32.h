// Full (non-causal) softmax attention of n tokens over themselves, per head, in f32 without
// an n x n score matrix: blocks of queries against blocks of keys with an online softmax
// (FlashAttention's running max and sum), scores and P.V through the f32 GEMM micro-kernels
// (kernels/gemm_f32.h), threads over (head, query block). For ViT encoders.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace vlkv {

// out[t][h][:] = sum_j softmax_j(scale * q[t][h] . k[j][h]) v[j][h][:] for t, j < n, h < n_heads.
// q, k, v, out: [n, n_heads, head_dim] (rows n_heads * head_dim apart). Logits are scaled
// before the softmax, as ggml_soft_max_ext; exps in f32 (exp_poly.h), sums in f32.
void attention_f32(const float* q, const float* k, const float* v, int64_t n, int64_t n_heads, int64_t head_dim,
                   float scale, float* out, ThreadPool& pool);

}  // namespace vlkv
