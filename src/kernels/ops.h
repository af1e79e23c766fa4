// Elementwise and per-row kernels of the decoder: norms, RoPE, activations,
// softmax. Scalar code written so the compiler vectorizes; each has a test.
#pragma once

#include <cmath>
#include <cstdint>

namespace vlkv {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], over n elements (one row).
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// silu(g) * u for one element; swiglu() applies it to a row, matvec_swiglu to each output.
inline float swiglu_one(float g, float u) { return (g / (1.0f + std::exp(-g))) * u; }

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

// M-RoPE (qwen2vl text decoder, ggml_rope_multi with GGML_ROPE_TYPE_MROPE): NeoX pairs
// (x[i], x[i + n_rot/2]); pair i takes its position from the section it falls in,
// sector = i % (sum of sections): [0, s0) -> pos[0] (t), [s0, s0+s1) -> pos[1] (h),
// then pos[2] (w), then pos[3] (extra). Every section uses the same frequency ladder
// base^(-2i/n_rot), so with pos[0..2] equal it is exactly rope() with kNeox.
// sections count rotary pairs; p.style is ignored (always NeoX pairs).
// interleaved (qwen3vl, GGML_ROPE_TYPE_IMROPE): sector % 3 == 1 takes h while sector < 3*s1,
// == 2 takes w while sector < 3*s2, == 0 takes t while sector < 3*s0, the rest pos[3].
void rope_multi(float* x, int n_heads, int head_dim, const int64_t pos[4], const int sections[4], const RopeParams& p,
                bool interleaved = false);

// Vision 2D RoPE (Qwen2-VL ViT, ggml_rope_multi with GGML_ROPE_TYPE_VISION): n_rot is
// head_dim/2 and pairs are (x[i], x[i + head_dim/2]) for every i < head_dim/2, so the
// whole head rotates. Pair i takes its position like rope_multi, but each section
// restarts the frequency ladder: the k-th pair of a section turns by
// pos * base^(-2k/n_rot). Qwen2-VL passes pos = (y, x, y, x) with sections head_dim/4 each.
void rope_vision(float* x, int n_heads, int head_dim, const int64_t pos[4], const int sections[4], float freq_base);

// In-place softmax over n logits.
void softmax(float* x, int64_t n);

// LayerNorm of one row: out[i] = (x[i] - mean) / sqrt(var + eps) * weight[i] + bias[i]
// (biased variance, as torch and ggml_norm). weight and bias may be null (1 and 0).
void layer_norm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), in f32.
// gelu() matches ggml's CPU op, which looks the result up in a table of f16 values
// indexed by x rounded to f16 for |x| < 10 (x >= 10 gives x, x <= -10 gives 0): its
// outputs differ from the formula by up to ~1e-3 relative, and llama.cpp's vision
// embeddings carry that rounding. gelu_exact() is the formula in f32 (the reference).
void gelu(const float* x, int64_t n, float* out);
void gelu_exact(const float* x, int64_t n, float* out);

// Quick GELU: x * sigmoid(1.702 x). gelu_quick() matches ggml's CPU op (an f16 table
// indexed by x rounded to f16, for every x); gelu_quick_exact() is the f32 formula.
void gelu_quick(const float* x, int64_t n, float* out);
void gelu_quick_exact(const float* x, int64_t n, float* out);

}  // namespace vlkv
