// Kernels of the vision encoders (ViTs): LayerNorm with bias, GELU, and
// unmasked multi-head attention over a whole image's tokens. Scalar code that
// follows ggml's CPU ops step by step, so f32 results agree with llama.cpp's clip.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace vlkv {

// out = (x - mean) / sqrt(var + eps) * weight + bias over one row of n (weight,
// bias may be null: ggml_norm then ggml_mul, ggml_add as separate steps).
void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out);

// GELU, tanh approximation, as ggml's CPU path computes it: the input is rounded
// to f16 and the result is the f16-rounded f32 GELU of that value (ggml's 64K
// table); |x| >= 10 short-cuts to 0 or x. out may alias x.
void gelu(const float* x, int64_t n, float* out);
// The same formula in f32 without the f16 rounding (the reference for tests).
float gelu_tanh_f32(float x);

// Full (unmasked) attention of n_tokens over themselves, per head:
// out[t, h] = softmax(scale * q[t, h] · k[:, h]) · v[:, h].
// q, k, v, out: [n_tokens, n_heads, head_dim]. Heads run in parallel on pool.
void attention_full(const float* q, const float* k, const float* v, int64_t n_tokens, int n_heads, int head_dim,
                    float scale, float* out, ThreadPool& pool);

}  // namespace vlkv
