// Qwen2-VL vision path (clip.projector_type "qwen2vl_merger"): dynamic resolution
// (each side a multiple of patch * merge), patch embedding by two temporal conv
// kernels (a still image fills both frames of the temporal patch), a ViT with 2D
// rotary positions (y, x) and no learned positions, post-LayerNorm, then the
// merger: each 2x2 block of patches concatenated and sent through Linear-GELU-Linear
// to the text model's n_embd. Weights are views into the mmproj GGUF.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vision/vit_common.h"
#include "vlkv/status.h"

namespace vlkv {

// Smart resize as libmtmd does it (img_tool::calc_size_preserved_ratio with min/max
// pixels): each side rounded to a multiple of align = patch * merge; scaled down when
// above max_pixels, up when below min_pixels. Returns {width, height}.
struct Qwen2VlSize {
  int32_t width = 0;
  int32_t height = 0;
};
Qwen2VlSize qwen2vl_target_size(int32_t width, int32_t height, int32_t align, int64_t min_pixels, int64_t max_pixels);

class Qwen2VlProjector {
 public:
  static Result<Qwen2VlProjector> load(const GgufFile& gguf);

  const VitHparams& hparams() const { return hp_; }
  int64_t merge() const { return merge_; }
  int64_t n_embd_out() const { return mm2_.n_rows; }
  // llama.cpp's limits for Qwen2-VL: 8 to 4096 merged tokens per image.
  int64_t min_pixels() const { return 8 * align() * align(); }
  int64_t max_pixels() const { return 4096 * align() * align(); }
  int64_t align() const { return hp_.patch_size * merge_; }

  // Resized (bilinear) and normalised image, [3, H, W] with H, W multiples of align().
  Result<ImageTensor> preprocess(const Image& image) const;
  // The same with a given target size (every frame of a video takes the first one's).
  Result<ImageTensor> preprocess(const Image& image, Qwen2VlSize size) const;
  // The size preprocess(image) resizes to.
  Qwen2VlSize target_size(const Image& image) const;

  // One temporal patch: frame0 through kernel 0 plus frame1 through kernel 1 (pass the
  // same tensor twice for a still image). embd: [(H/align) * (W/align), n_embd_out],
  // merged tokens row-major over the (H/align) x (W/align) grid.
  Status encode(const ImageTensor& frame0, const ImageTensor& frame1, std::vector<float>& embd,
                ThreadPool& pool) const;

 private:
  VitHparams hp_;
  int64_t merge_ = 2;                 // clip.vision.spatial_merge_size
  WeightMatrix patch_kernel0_;        // [n_embd, 3 * patch * patch] v.patch_embd.weight
  WeightMatrix patch_kernel1_;        // [n_embd, 3 * patch * patch] v.patch_embd.weight.1
  std::vector<VitLayer> layers_;
  std::vector<float> post_ln_w_, post_ln_b_;  // [n_embd]; empty when absent
  WeightMatrix mm0_;                  // [merge^2 * n_embd, merge^2 * n_embd]
  std::vector<float> mm0_b_;
  WeightMatrix mm2_;                  // [n_embd_out, merge^2 * n_embd]
  std::vector<float> mm2_b_;
};

}  // namespace vlkv
