// SigLIP-style ViT (SmolVLM/Idefics3, LLaVA-OneVision): patch embedding with bias,
// learned position embeddings, pre-norm blocks (LayerNorm, GELU MLP), post-LayerNorm.
// Weights are views into the mmproj GGUF, which must outlive the encoder.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vision/vit_common.h"
#include "vlkv/status.h"

namespace vlkv {

class SiglipEncoder {
 public:
  // Binds v.patch_embd.{weight,bias}, v.position_embd.weight, v.blk.*, v.post_ln.*.
  static Result<SiglipEncoder> load(const GgufFile& gguf, const VitHparams& hp);

  int64_t n_patches_side() const { return hp_.image_size / hp_.patch_size; }
  int64_t n_patches() const { return n_patches_side() * n_patches_side(); }

  // img: [3, image_size, image_size] -> out: [n_patches, n_embd] after the post-LayerNorm,
  // patches row-major.
  Status encode(const ImageTensor& img, std::vector<float>& out, ThreadPool& pool) const;

  const VitHparams& hparams() const { return hp_; }

 private:
  VitHparams hp_;
  WeightMatrix patch_kernel_;         // [n_embd, 3 * patch * patch]
  std::vector<float> patch_bias_;     // [n_embd]
  WeightMatrix pos_embd_;             // [n_patches, n_embd]
  std::vector<VitLayer> layers_;
  std::vector<float> post_ln_w_, post_ln_b_;  // [n_embd]
};

}  // namespace vlkv
