// Binding mmproj tensors and reading clip.* metadata, shared by every vision
// model: matrices stay views into the mapping, small tensors (norms, biases,
// position tables, conv kernels) become owned f32 copies. Shapes are checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kernels/matmul.h"
#include "vlkv/status.h"

namespace vlkv {

// The clip.vision.* hyperparameters common to the ViTs (llama.cpp key names).
struct ClipVisionHparams {
  std::string projector_type;    // clip.projector_type ("mlp" when absent)
  int64_t image_size = 0;        // clip.vision.image_size: side of the square the ViT sees
  int64_t patch_size = 0;        // clip.vision.patch_size
  int64_t n_embd = 0;            // clip.vision.embedding_length
  int64_t n_ff = 0;              // clip.vision.feed_forward_length
  int64_t n_layers = 0;          // clip.vision.block_count
  int64_t n_heads = 0;           // clip.vision.attention.head_count
  int64_t head_dim = 0;          // n_embd / n_heads
  int64_t projection_dim = 0;    // clip.vision.projection_dim (0 if absent)
  float eps = 1e-6f;             // clip.vision.attention.layer_norm_epsilon
  float image_mean[3] = {0.5f, 0.5f, 0.5f};  // clip.vision.image_mean
  float image_std[3] = {0.5f, 0.5f, 0.5f};   // clip.vision.image_std
  bool use_gelu = false;         // clip.use_gelu
  bool use_silu = false;         // clip.use_silu
  std::vector<int64_t> feature_layers;  // clip.vision.feature_layer (empty if absent)
};

// Reads and sanity-checks the keys above (sizes positive and bounded, n_embd % n_heads == 0,
// image_size % patch_size == 0). InvalidFile names the offending key.
Result<ClipVisionHparams> read_clip_vision_hparams(const GgufFile& mmproj);

// A 2-D matrix with ggml dims {n_cols, n_rows} in a weight format vlkv implements.
Result<WeightMatrix> bind_vision_matrix(const GgufFile& gguf, const std::string& name, int64_t n_cols,
                                        int64_t n_rows);
// Any tensor with exactly these ggml dims, converted to f32 (f32/f16/bf16/quantized rows).
Result<std::vector<float>> read_vision_tensor(const GgufFile& gguf, const std::string& name,
                                              const std::vector<int64_t>& dims);
// As read_vision_tensor, but an absent tensor gives an empty vector (optional biases, norms).
Result<std::vector<float>> read_optional_vision_tensor(const GgufFile& gguf, const std::string& name,
                                                       const std::vector<int64_t>& dims);

}  // namespace vlkv
