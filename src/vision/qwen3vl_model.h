// Qwen3-VL vision path (clip.projector_type "qwen3vl_merger"), as llama.cpp's clip graph
// for PROJECTOR_TYPE_QWEN3VL: the Qwen2-VL patch grid (two temporal conv kernels, each
// side a multiple of patch * merge, patches in merge-block order, 2D M-RoPE (y, x, y, x)
// in the ViT) plus a conv bias and a learned square position grid resized bilinearly
// (align corners) to the patch grid. ViT blocks: LayerNorm, fused attn_qkv, GELU FFN.
// Merger: post-LayerNorm per patch, 2x2 concat, mm.0, GELU, mm.2. Deepstack: after each
// ViT layer N with v.deepstack.N.* tensors, the layer output's 2x2 concat goes through
// LayerNorm, fc1, GELU, fc2; those features follow the merger output in each row, so a
// row is [main | deepstack(first layer) | deepstack(next) ...] (the text model adds part
// k after its layer k-1). Images are resized keeping their aspect ratio and padded black
// (libmtmd's dyn_size preprocessor), not stretched.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vision/qwen2vl_model.h"
#include "vision/vit_common.h"
#include "vlkv/status.h"

namespace vlkv {

// Resizes a [side_h, side_w, dim] grid (row-major cells, dim floats each) to
// [out_h, out_w, dim] as ggml_interpolate does with GGML_SCALE_MODE_BILINEAR |
// GGML_SCALE_FLAG_ALIGN_CORNERS (corner cells map onto corner cells).
std::vector<float> resize_grid_bilinear_align_corners(const std::vector<float>& grid, int64_t side_h, int64_t side_w,
                                                      int64_t dim, int64_t out_h, int64_t out_w);

class Qwen3VlProjector {
 public:
  static constexpr const char* kName = "qwen3vl";  // in error messages
  static Result<Qwen3VlProjector> load(const GgufFile& gguf);

  const VitHparams& hparams() const { return hp_; }
  int64_t align() const { return hp_.patch_size * kMerge; }
  int64_t n_embd_main() const { return mm2_.n_rows; }
  int64_t n_deepstack() const { return static_cast<int64_t>(deepstack_.size()); }
  // Row width of the output: the merger's and one part per deepstack layer.
  int64_t n_embd_out() const { return n_embd_main() * (1 + n_deepstack()); }
  // Merged tokens per image: llama.cpp's 8 to 4096 unless set (ImageTokenBounds).
  int64_t min_pixels() const { return tokens_.min * align() * align(); }
  int64_t max_pixels() const { return tokens_.max * align() * align(); }
  void set_token_bounds(ImageTokenBounds b) { tokens_ = b; }

  // qwen2vl_target_size for a width x height image, or preprocess's error when it cannot fit.
  Result<Qwen2VlSize> fitted_size(int32_t width, int32_t height) const;
  // Aspect-preserving bilinear resize into fitted_size(image), centred on black, then
  // normalised: [3, H, W] with H, W multiples of align().
  Result<ImageTensor> preprocess(const Image& image) const;

  // One temporal patch (frame0 through kernel 0, frame1 through kernel 1; the same tensor
  // twice for a still image). embd: [(H/align) * (W/align), n_embd_out()], merged tokens
  // row-major.
  Status encode(const ImageTensor& frame0, const ImageTensor& frame1, std::vector<float>& embd,
                ThreadPool& pool) const;

 private:
  static constexpr int64_t kMerge = 2;  // llama.cpp's graph hard-codes the 2x2 merge
  ImageTokenBounds tokens_;

  struct Deepstack {
    int64_t layer = 0;                         // after this ViT layer
    std::vector<float> norm_w, norm_b;         // [4 * n_embd]
    WeightMatrix fc1;                          // [hidden, 4 * n_embd]
    std::vector<float> fc1_b;                  // [hidden]
    WeightMatrix fc2;                          // [n_embd_main, hidden]
    std::vector<float> fc2_b;                  // [n_embd_main]
  };

  // LayerNorm(4d) -> Linear -> GELU -> Linear over rows of [n_rows, 4 * n_embd] (the merger
  // without its norm, or a deepstack merger with it). out: [n_rows, fc2.n_rows].
  void merge_mlp(const float* x, int64_t n_rows, const std::vector<float>* norm_w, const std::vector<float>* norm_b,
                 const WeightMatrix& fc1, const std::vector<float>& b1, const WeightMatrix& fc2,
                 const std::vector<float>& b2, float* out, ThreadPool& pool) const;

  VitHparams hp_;
  WeightMatrix patch_kernel0_;        // [n_embd, 3 * patch * patch] v.patch_embd.weight
  WeightMatrix patch_kernel1_;        // [n_embd, 3 * patch * patch] v.patch_embd.weight.1
  std::vector<float> patch_bias_;     // [n_embd] v.patch_embd.bias
  std::vector<float> pos_embd_;       // [pos_side, pos_side, n_embd] v.position_embd.weight
  int64_t pos_side_ = 0;
  std::vector<VitLayer> layers_;      // q/k/v are row views of v.blk.N.attn_qkv
  std::vector<float> pre_ln_w_, pre_ln_b_;    // [n_embd]; empty when absent
  std::vector<float> post_ln_w_, post_ln_b_;  // [n_embd]; empty when absent
  WeightMatrix mm0_;                  // [hidden, 4 * n_embd]
  std::vector<float> mm0_b_;
  WeightMatrix mm2_;                  // [n_embd_main, hidden]
  std::vector<float> mm2_b_;
  std::vector<Deepstack> deepstack_;  // by ViT layer, ascending
};

}  // namespace vlkv
