// The one ViT stack of every mmproj encoder (CLIP for LLaVA, SigLIP for idefics3,
// the Qwen2-VL ViT): clip.vision.* hyperparameters, the v.blk.N.* weights of a
// pre-norm transformer block, the block's forward pass with full (non-causal)
// attention, and patch embedding as a matmul. Biases are optional as in llama.cpp's
// clip loader (an absent bias is an empty vector and adds nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "kernels/matmul.h"
#include "vision/image.h"
#include "vlkv/status.h"

namespace vlkv {

enum class VitNorm {
  kLayerNorm,  // ln*.weight/bias as LayerNorm (CLIP, SigLIP, Qwen2-VL)
  kRms,        // RMSNorm (Qwen2.5-VL): weight, then the bias when one is stored
};

enum class VitFfnOp {
  kGelu,       // clip.use_gelu: tanh GELU (ggml_gelu)
  kGeluQuick,  // neither use_gelu nor use_silu (llama.cpp's default)
  kSilu,       // clip.use_silu
};

struct VitHparams {
  std::string projector_type;  // clip.projector_type ("mlp" when absent, as llama.cpp)
  int64_t image_size = 0;      // clip.vision.image_size
  int64_t patch_size = 0;      // clip.vision.patch_size
  int64_t n_embd = 0;          // clip.vision.embedding_length
  int64_t n_ff = 0;            // clip.vision.feed_forward_length
  int64_t n_layers = 0;        // clip.vision.block_count
  int64_t n_heads = 0;         // clip.vision.attention.head_count
  int64_t head_dim = 0;        // n_embd / n_heads
  int64_t projection_dim = 0;  // clip.vision.projection_dim (0 when absent)
  float eps = 1e-6f;           // clip.vision.attention.layer_norm_epsilon
  float image_mean[3] = {0.5f, 0.5f, 0.5f};
  float image_std[3] = {0.5f, 0.5f, 0.5f};
  VitFfnOp ffn_op = VitFfnOp::kGeluQuick;
  VitNorm norm = VitNorm::kLayerNorm;  // set by the model (llama.cpp keys it on the projector type)
  std::vector<int64_t> feature_layers;  // clip.vision.feature_layer (empty when absent)
};

// Reads and validates clip.vision.* (bounds stop absurd sizes before any allocation).
Result<VitHparams> read_vit_hparams(const GgufFile& gguf);

struct VitLayer {
  std::vector<float> ln1_w, ln1_b;   // [n_embd] (bias may be empty)
  WeightMatrix wq, wk, wv, wo;       // [n_embd rows, n_embd cols]
  std::vector<float> bq, bk, bv, bo; // [n_embd] (each may be empty)
  std::vector<float> ln2_w, ln2_b;   // [n_embd] (bias may be empty)
  WeightMatrix ffn_up;               // [n_ff, n_embd]
  std::vector<float> ffn_up_b;       // [n_ff]
  WeightMatrix ffn_gate;             // [n_ff, n_embd]; n_rows == 0 when absent (ungated MLP)
  std::vector<float> ffn_gate_b;     // [n_ff]
  WeightMatrix ffn_down;             // [n_embd, n_ff]
  std::vector<float> ffn_down_b;     // [n_embd]
  std::vector<float> ls1, ls2;       // [n_embd] layer scales (InternViT); empty when absent
};

// Tensor binding with shape checks (ggml dims {n_cols, n_rows}); the GgufFile must
// outlive the views. A vector is copied to f32.
Result<WeightMatrix> bind_vit_matrix(const GgufFile& gguf, const std::string& name, int64_t n_cols, int64_t n_rows);
Result<std::vector<float>> bind_vit_vector(const GgufFile& gguf, const std::string& name, int64_t n);
// As bind_vit_vector, but an absent tensor gives an empty vector.
Result<std::vector<float>> bind_vit_vector_optional(const GgufFile& gguf, const std::string& name, int64_t n);
// An optional norm `name`.weight / `name`.bias: both empty without the weight, the bias
// optional with it.
Status bind_vit_norm_optional(const GgufFile& gguf, const std::string& name, int64_t n, std::vector<float>& w,
                              std::vector<float>& b);
// A two-layer MLP's weights (w1, b1, w2, b2): fc1 takes n_in columns, fc2 must output n_out
// (0: any); the hidden size is w1's.
Status bind_vit_mlp(const GgufFile& gguf, const std::string& w1, const std::string& b1, const std::string& w2,
                    const std::string& b2, int64_t n_in, int64_t n_out, WeightMatrix& fc1, std::vector<float>& fc1_b,
                    WeightMatrix& fc2, std::vector<float>& fc2_b);
// A conv kernel with ggml dims {k, k, 3, n_out} as a matrix [n_out rows, 3*k*k cols].
Result<WeightMatrix> bind_vit_patch_kernel(const GgufFile& gguf, const std::string& name, int64_t patch,
                                           int64_t n_out);
Result<std::vector<VitLayer>> bind_vit_layers(const GgufFile& gguf, const VitHparams& hp);
// The block's weights after q, k and v (attn_out, ln2, ffn_*) under prefix "v.blk.N.", for a
// model that binds its q/k/v otherwise (Qwen3-VL's fused attn_qkv).
Status bind_vit_block_after_qkv(const GgufFile& gguf, const VitHparams& hp, const std::string& prefix, VitLayer& l);

// Rotates q or k in place: [n_tokens, n_heads, head_dim]. Null for learned positions.
using VitRope = std::function<void(float* qk, int64_t n_tokens)>;

// Layer norm of each of n rows of x [n, dim] into out (may alias x); bias may be empty.
void vit_layer_norm_rows(const float* x, const std::vector<float>& w, const std::vector<float>& b, int64_t n,
                         int64_t dim, float eps, float* out);
// hp.norm (LayerNorm or RMSNorm) of each of n rows of x [n, n_embd] into out (may alias x).
void vit_norm_rows(const VitHparams& hp, const float* x, const std::vector<float>& w, const std::vector<float>& b,
                   int64_t n, float* out);

// One pre-norm block over the n tokens of x [n, n_embd], in place (N = hp.norm):
//   x += ls1 * (Wo·attention(Wq·N1(x)+bq, Wk·N1(x)+bk, Wv·N1(x)+bv) + bo)
//   x += ls2 * (W_down·act(W_up·N2(x) + b_up) + b_down)                       (ungated)
//   x += ls2 * (W_down·(act(W_gate·N2(x) + b_gate) * (W_up·N2(x) + b_up)) + b_down)   (gated)
// The layer scales multiply only when present (llama.cpp's build_vit: ls1/ls2 optional).
// windows: lengths of consecutive token runs that attend only within themselves
// (window attention, a block-diagonal mask); null or empty: full attention.
// scratch: the block's buffers, kept by the caller across the layers of one encode (tens to
// hundreds of MB: allocating them per layer costs page faults and zeroing); null: local ones.
struct VitScratch {
  std::vector<float> xn, q, k, v, attn, proj, up, gate;
};
void vit_block(const VitHparams& hp, const VitLayer& l, float* x, int64_t n, const VitRope& rope, ThreadPool& pool,
               const std::vector<int64_t>* windows = nullptr, VitScratch* scratch = nullptr);

// Full softmax attention of every query over every key, per head (kernels/attention_f32.h:
// blocked, no n x n score matrix). q, k, v: [n, n_heads, head_dim]; out: [n, n_heads, head_dim].
void vit_attention(const float* q, const float* k, const float* v, int64_t n, int64_t n_heads, int64_t head_dim,
                   float scale, float* out, ThreadPool& pool);

// Non-overlapping patch x patch convolution (stride = kernel) of a [3, H, W] tensor as a
// matmul: out[p][o] = sum kernel[o][c][ky][kx] * img[c][py*patch+ky][px*patch+kx], patches
// row-major (p = py * W/patch + px). out: [n_patches, kernel.n_rows]. No bias.
void vit_patch_embed(const ImageTensor& img, int64_t patch, const WeightMatrix& kernel, float* out, ThreadPool& pool);

// y[t][i] += bias[i] for each of n rows of dim values.
void add_bias_rows(float* y, const std::vector<float>& bias, int64_t n, int64_t dim);

// y[t][i] *= scale[i] for each of n rows of dim values (nothing when scale is empty).
void scale_rows(float* y, const std::vector<float>& scale, int64_t n, int64_t dim);

// The FFN activation, as ggml's CPU ops compute it.
void vit_activation(VitFfnOp op, float* x, int64_t n);

}  // namespace vlkv
