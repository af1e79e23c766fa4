// Attention of the vision encoders (ViTs): unmasked multi-head attention over a
// whole image's tokens (LayerNorm and GELU are in kernels/ops.h). Scalar code
// following ggml's CPU ops, so f32 results agree with llama.cpp's clip.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace vlkv {

// Full (unmasked) attention of n_tokens over themselves, per head:
// out[t, h] = softmax(scale * q[t, h] · k[:, h]) · v[:, h].
// q, k, v, out: [n_tokens, n_heads, head_dim]. Heads run in parallel on pool.
void attention_full(const float* q, const float* k, const float* v, int64_t n_tokens, int n_heads, int head_dim,
                    float scale, float* out, ThreadPool& pool);

}  // namespace vlkv
