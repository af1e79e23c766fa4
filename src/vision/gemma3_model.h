// Gemma 3 vision path (clip.projector_type "gemma3"), as llama.cpp's clip_graph_siglip
// builds it: one image_size x image_size image (aspect-preserving bilinear resize onto
// a black canvas), the SigLIP ViT, an n_merge x n_merge average pool of the patch grid
// (clip.vision.projector.scale_factor, 4 when absent), RMSNorm x mm.soft_emb_norm.weight,
// then mm.input_projection.weight (stored [vision, text]: used transposed). libmtmd frames
// the tokens as <start_of_image> [tokens] <end_of_image> and decodes them non-causally.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vision/siglip_encoder.h"
#include "vision/vit_common.h"
#include "vlkv/status.h"

namespace vlkv {

class Gemma3Projector {
 public:
  static Result<Gemma3Projector> load(const GgufFile& gguf);

  const VitHparams& hparams() const { return encoder_.hparams(); }
  int64_t pool_size() const { return merge_; }
  int64_t tokens_side() const { return encoder_.n_patches_side() / merge_; }
  int64_t n_tokens() const { return tokens_side() * tokens_side(); }
  int64_t n_embd_out() const { return proj_.n_rows; }

  // The ViT input: [3, image_size, image_size], normalised with the file's mean/std.
  Result<ImageTensor> preprocess(const Image& image) const;
  // img -> embd [n_tokens, n_embd_out], tokens row-major over the pooled grid.
  Status encode(const ImageTensor& img, std::vector<float>& embd, ThreadPool& pool) const;

 private:
  SiglipEncoder encoder_;
  int64_t merge_ = 4;                    // pooling kernel and stride (llama.cpp's n_merge)
  std::vector<float> soft_emb_norm_;     // [n_embd]
  // mm.input_projection.weight transposed, in its own type (shared: proj_ points into it)
  std::shared_ptr<const std::vector<uint8_t>> proj_data_;
  WeightMatrix proj_;                    // [n_embd_out rows, n_embd cols] over *proj_data_
};

}  // namespace vlkv
