// InternVL vision path (clip.projector_type "internvl"), as llama.cpp computes it:
// dynamic tiling (tile grids a x b with min_tiles <= a*b <= max_tiles, picked by llava's
// select_best_resolution), each tile and a stretched overview through InternViT (class
// token appended after the patches, layer scales ls1/ls2), the class token dropped, a
// pixel shuffle by clip.vision.projector.scale_factor and the mlp1 projector
// (LayerNorm eps 1e-5, Linear, GELU, Linear). The token layout is
// <img> [tile 1] ... [tile n] [overview] </img>.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vision/select_best_resolution.h"
#include "vision/vit_common.h"
#include "vlkv/status.h"

namespace vlkv {

struct InternvlTiles {
  int32_t grid_rows = 0;  // 0 when the image fits one tile (only the overview)
  int32_t grid_cols = 0;
  std::vector<ImageTensor> tensors;  // grid tiles row-major, then the overview; each [3, S, S]
};

// clip.cpp's candidate canvases: the file's clip.vision.image_grid_pinpoints first (as
// llama.cpp reads them for every projector), then a*S x b*S for a in [min, max] and b in
// [max(ceil(min/a), min), min(max/a, max)], in that order (select_best_resolution keeps the
// first of equals).
std::vector<ImageSize> internvl_resolution_candidates(int32_t tile_size, int32_t min_tiles, int32_t max_tiles,
                                                      const std::vector<ImageSize>& pinpoints);

// libmtmd's llava-uhd slicer with InternVL's settings: an image larger than one tile on
// either side is resized (bicubic, aspect kept, centred on black) onto the best candidate
// canvas and cut into S x S tiles row-major; the overview is a bilinear stretch to S x S
// and comes last. An image within S x S gives the overview only.
// The grid internvl_preprocess cuts for a width x height image (tensors empty), with its errors.
Result<InternvlTiles> internvl_grid(int32_t width, int32_t height, int32_t tile_size,
                                    const std::vector<ImageSize>& candidates);
Result<InternvlTiles> internvl_preprocess(const Image& image, int32_t tile_size, const std::vector<ImageSize>& candidates,
                                          const float mean[3], const float std[3]);

class InternvlProjector {
 public:
  static Result<InternvlProjector> load(const GgufFile& gguf);

  const VitHparams& hparams() const { return hp_; }
  int64_t scale_factor() const { return scale_; }
  int64_t tokens_side() const { return hp_.image_size / hp_.patch_size / scale_; }  // per tile, after the shuffle
  int64_t tokens_per_tile() const { return tokens_side() * tokens_side(); }
  int64_t n_embd_out() const { return mlp3_.n_rows; }
  const std::vector<ImageSize>& candidates() const { return candidates_; }

  Result<InternvlTiles> preprocess(const Image& image) const;
  Result<InternvlTiles> grid(int32_t width, int32_t height) const;

  // One tile [3, S, S] -> embd [tokens_per_tile, n_embd_out].
  Status encode_tile(const ImageTensor& tile, std::vector<float>& embd, ThreadPool& pool) const;

 private:
  VitHparams hp_;
  int64_t scale_ = 1;                    // clip.vision.projector.scale_factor (llama.cpp's n_merge, default 1)
  std::vector<ImageSize> candidates_;    // tile canvases, in llama.cpp's order
  std::vector<float> patch_kernel_f16_;  // [n_embd, 3 * patch * patch] the conv kernel rounded to f16
  std::vector<float> patch_b_;           // [n_embd] (may be empty)
  std::vector<float> class_embd_;        // [n_embd]
  WeightMatrix pos_embd_;                // [n_patches + 1, n_embd]: row i for token i, the class token last
  std::vector<float> pre_ln_w_, pre_ln_b_, post_ln_w_, post_ln_b_;  // [n_embd] (may be empty)
  std::vector<VitLayer> layers_;
  std::vector<float> mlp0_w_, mlp0_b_;   // [n_embd * s * s] LayerNorm
  WeightMatrix mlp1_, mlp3_;             // [n_hidden, n_embd * s * s], [n_out, n_hidden]
  std::vector<float> mlp1_b_, mlp3_b_;   // [n_hidden], [n_out]
};

}  // namespace vlkv
