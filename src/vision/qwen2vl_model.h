// Qwen2-VL vision path (clip.projector_type "qwen2vl_merger"; Qwen2.5-VL is
// "qwen2.5vl_merger", see below): dynamic resolution
// (each side a multiple of patch * merge), patch embedding by two temporal conv
// kernels (a still image fills both frames of the temporal patch), a ViT with 2D
// rotary positions (y, x) and no learned positions, post-LayerNorm, then the
// merger: each 2x2 block of patches concatenated and sent through Linear-GELU-Linear
// to the text model's n_embd. Weights are views into the mmproj GGUF.
//
// Qwen2.5-VL (as llama.cpp's clip graph for PROJECTOR_TYPE_QWEN25VL): RMSNorm in
// place of LayerNorm (blocks and the merger's norm, v.post_ln), a gated MLP
// (ffn_gate/ffn_up/ffn_down, act(gate) * up with the clip.use_silu activation), and
// window attention: the merged-token grid is cut into windows of
// clip.vision.window_size / (patch * merge) merged tokens a side (window_size is in
// pixels, 112 by default as llama.cpp), patches are reordered window by window (each
// merged token's merge x merge patches stay together), layers attend within their
// window except the full-attention ones (clip.vision.wa_layer_indexes when present,
// else every layer il with (il + 1) % clip.vision.n_wa_pattern == 0), and the merger's
// output is put back in row-major order.
#pragma once

#include <cstdint>
#include <string>
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

// How many merged tokens the Qwen-VL family's encoders give one image (or frame): llama.cpp's
// 8 to 4096 by default; --image-min-tokens / --image-max-tokens move them (as llama.cpp's flags),
// trading resolution for length. Images are resized into [min, max] * align^2 pixels.
struct ImageTokenBounds {
  int64_t min = 8, max = 4096;
  // "" when usable: 1 <= min <= max <= 2^20.
  std::string check() const;
};
// qwen2vl_target_size, or `who`'s InvalidArgument for an empty size or one that does not fit
// (not a multiple of align, or past max_pixels).
Result<Qwen2VlSize> qwen2vl_fitted_size(const char* who, int32_t width, int32_t height, int64_t align,
                                        int64_t min_pixels, int64_t max_pixels);

// The two frames of a temporal patch: the same size, 3 x H x W, H and W multiples of align;
// else `who`'s InvalidArgument.
Status qwen2vl_check_frames(const char* who, const ImageTensor& frame0, const ImageTensor& frame1, int64_t align);

// Qwen-VL's 2D RoPE over [n_tokens, n_heads, head_dim] rows: the first half of each head's
// rotary pairs turns with the token's patch row pos_y, the second with its column pos_x
// (the vectors are read when the rope runs: they may be reordered in between).
VitRope qwen2vl_rope_2d(const VitHparams& hp, const std::vector<int64_t>& pos_y, const std::vector<int64_t>& pos_x,
                        ThreadPool& pool);

// Window order of a grid_h x grid_w merged-token grid cut into window x window tiles
// (edge tiles smaller), tiles row-major, tokens row-major inside each tile.
struct Qwen2VlWindows {
  std::vector<int64_t> order;    // order[i] = row-major index of the i-th token in window order
  std::vector<int64_t> lengths;  // merged tokens per window, in window order
};
Qwen2VlWindows qwen2vl_windows(int64_t grid_h, int64_t grid_w, int64_t window);

// Patch rows from row-major (py, px) into merge-block order (by, bx, dy, dx), so each merged
// token's merge x merge patches are consecutive; pos_y / pos_x get each row's patch coordinates.
//   rows, x: [ph * pw, d]; pos_y, pos_x: [ph * pw]. ph and pw are multiples of merge.
void qwen2vl_merge_block_order(const float* rows, int64_t ph, int64_t pw, int64_t merge, int64_t d, float* x,
                               int64_t* pos_y, int64_t* pos_x);

class Qwen2VlProjector {
 public:
  static constexpr const char* kName = "qwen2vl";  // in error messages
  static Result<Qwen2VlProjector> load(const GgufFile& gguf);

  const VitHparams& hparams() const { return hp_; }
  int64_t merge() const { return merge_; }
  int64_t n_embd_out() const { return mm2_.n_rows; }
  // Merged tokens per image: llama.cpp's 8 to 4096 unless set (ImageTokenBounds).
  int64_t min_pixels() const { return tokens_.min * align() * align(); }
  int64_t max_pixels() const { return tokens_.max * align() * align(); }
  void set_token_bounds(ImageTokenBounds b) { tokens_ = b; }
  int64_t align() const { return hp_.patch_size * merge_; }
  bool is_qwen25() const { return hp_.projector_type == "qwen2.5vl_merger"; }
  // Window attention (Qwen2.5-VL): side of a window in merged tokens; 0 when off.
  int64_t window_merged() const { return window_attn_ ? window_size_ / align() : 0; }
  bool layer_is_full(int64_t il) const { return !window_attn_ || full_layer_[static_cast<size_t>(il)]; }

  // Resized (bilinear, aspect kept, centred on black as libmtmd) and normalised image,
  // [3, H, W] with H, W multiples of align().
  Result<ImageTensor> preprocess(const Image& image) const;
  // The same with a given target size (every frame of a video takes the first one's).
  Result<ImageTensor> preprocess(const Image& image, Qwen2VlSize size) const;
  // The size preprocess(image) resizes to.
  Qwen2VlSize target_size(const Image& image) const;
  // target_size for a width x height image, or preprocess's error when it cannot fit.
  Result<Qwen2VlSize> fitted_size(int32_t width, int32_t height) const;

  // One temporal patch: frame0 through kernel 0 plus frame1 through kernel 1 (pass the
  // same tensor twice for a still image). embd: [(H/align) * (W/align), n_embd_out],
  // merged tokens row-major over the (H/align) x (W/align) grid.
  Status encode(const ImageTensor& frame0, const ImageTensor& frame1, std::vector<float>& embd,
                ThreadPool& pool) const;

 private:
  VitHparams hp_;
  ImageTokenBounds tokens_;
  int64_t merge_ = 2;                 // clip.vision.spatial_merge_size
  bool window_attn_ = false;          // Qwen2.5-VL window attention in use
  int64_t window_size_ = 112;         // clip.vision.window_size (pixels)
  std::vector<bool> full_layer_;      // [n_layers] layers with full attention
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
