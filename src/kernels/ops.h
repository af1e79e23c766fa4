// Elementwise and per-row kernels of the decoder: norms, RoPE, activations,
// softmax. Scalar code written so the compiler vectorizes; each has a test.
#pragma once

#include <cstdint>

namespace vlkv {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], over n elements (one row).
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

enum class RopeStyle {
  kNormal,  // llama: rotate adjacent pairs (x[2i], x[2i+1])
  kNeox,    // qwen2, neox: rotate (x[i], x[i + n_rot/2])
};

struct RopeParams {
  RopeStyle style = RopeStyle::kNormal;
  int n_rot = 0;              // rotated dims per head (<= head_dim); the rest pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // linear scaling: theta = pos * freq_scale * base^(-2i/n_rot)
};

// Rotates n_heads heads of head_dim floats at x (contiguous [n_heads, head_dim]) for position pos.
// Angles computed as ggml does (theta = pos * freq_scale * base^(-2i/n_rot), in float).
void rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);

// M-RoPE (qwen2vl) goes here as its own function, e.g.
//   rope_multi(x, n_heads, head_dim, const int64_t pos[4] /* t, h, w, extra */,
//              const int sections[4], const RopeParams& p)
// where pair i takes its position from the section it falls in (ggml_rope_multi).
// Not declared until it is implemented (a later issue).

// In-place softmax over n logits.
void softmax(float* x, int64_t n);

}  // namespace vlkv
