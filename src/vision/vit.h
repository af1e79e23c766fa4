// The shared Vision Transformer of CLIP and SigLIP as llama.cpp's mmproj files
// store it (tensor names v.*): conv patch embedding, optional class token,
// learned positions, optional pre-LayerNorm, pre-norm encoder blocks (LayerNorm,
// multi-head attention with biases, GELU MLP), optional post-LayerNorm.
// Projectors (mlp, idefics3, ...) live in their own files and consume its output.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "kernels/matmul.h"
#include "vision/image.h"
#include "vision/vision_weights.h"
#include "vlkv/status.h"

namespace vlkv {

struct VitLayerWeights {
  std::vector<float> ln1_w, ln1_b;            // [n_embd]
  WeightMatrix wq, wk, wv, wo;                // [n_embd, n_embd]
  std::vector<float> bq, bk, bv, bo;          // [n_embd] (empty: no bias)
  std::vector<float> ln2_w, ln2_b;            // [n_embd]
  WeightMatrix ffn_up;                        // [n_ff, n_embd]
  std::vector<float> ffn_up_b;                // [n_ff]
  WeightMatrix ffn_down;                      // [n_embd, n_ff]
  std::vector<float> ffn_down_b;              // [n_embd]
};

struct VitWeights {
  std::vector<float> patch_w;        // [n_embd, 3, patch, patch] conv kernel (ggml {p, p, 3, n_embd})
  std::vector<float> patch_b;        // [n_embd] (empty: no bias)
  std::vector<float> class_embd;     // [n_embd] (empty: no class token)
  std::vector<float> position_embd;  // [n_positions, n_embd]; n_positions = n_patches (+1 with a class token)
  std::vector<float> pre_ln_w, pre_ln_b;    // [n_embd] (empty: none)
  std::vector<VitLayerWeights> layers;
  std::vector<float> post_ln_w, post_ln_b;  // [n_embd] (empty: none)
};

// Binds v.* tensors for hp; n_layers_used layers (a model may stop before the last).
Result<VitWeights> bind_vit_weights(const GgufFile& gguf, const ClipVisionHparams& hp, int64_t n_layers_used);

enum class VitFfn { kGelu, kSilu };

class Vit {
 public:
  Vit(const ClipVisionHparams& hp, const VitWeights& w) : hp_(hp), w_(w) {}

  // Patch embedding + class token + positions: img [3, image_size, image_size] ->
  // x [n_tokens, n_embd] (class token first when present). Then pre-LayerNorm.
  void embed(const ImageTensor& img, std::vector<float>& x, ThreadPool& pool) const;
  // One encoder block in place on x [n_tokens, n_embd].
  void layer(int64_t il, std::vector<float>& x, int64_t n_tokens, VitFfn ffn, ThreadPool& pool) const;
  // Post-LayerNorm in place (no-op without one).
  void post_norm(std::vector<float>& x, int64_t n_tokens) const;

  int64_t n_patches_side() const { return hp_.image_size / hp_.patch_size; }
  int64_t n_tokens() const;  // patches (+1 with a class token)

 private:
  const ClipVisionHparams& hp_;
  const VitWeights& w_;
};

// Linear layer over rows: y [n, w.n_rows] = x [n, w.n_cols] · wᵀ + b (b may be empty).
void linear(const WeightMatrix& w, const std::vector<float>& b, const float* x, int64_t n, float* y, ThreadPool& pool);

}  // namespace vlkv
