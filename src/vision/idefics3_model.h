// SmolVLM / Idefics3 vision path (clip.projector_type "idefics3"): the image is split
// into image_size tiles of an aspect-preserving "refined" resize plus one global
// image; each goes through the SigLIP ViT, a pixel shuffle (scale_factor x
// scale_factor neighbours concatenated) and a bias-free linear projection. The
// tiles' embeddings are framed by <fake_token_around_image>, <row_R_col_C> and
// <global-img> tokens exactly as libmtmd does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vision/siglip_encoder.h"
#include "vision/vit_common.h"
#include "vlkv/status.h"

namespace vlkv {

struct Idefics3Tiles {
  int32_t grid_rows = 0;  // 0 when the image is not split (only the global image)
  int32_t grid_cols = 0;
  std::vector<ImageTensor> tensors;  // grid tiles row-major, then the global image; each [3, S, S]
};

// libmtmd's idefics3 preprocessing: refined size = the image scaled so its longest side
// is longest_edge, each side rounded up to a multiple of image_size; refined image =
// bicubic aspect-preserving resize onto that canvas with black padding; tiles = its
// image_size crops, row-major; global image = bilinear resize to image_size x image_size.
// longest_edge <= 0 gives the global image only.
// The grid idefics3_preprocess cuts for a width x height image (tensors empty).
Result<Idefics3Tiles> idefics3_grid(int32_t width, int32_t height, int64_t image_size, int64_t longest_edge);
Result<Idefics3Tiles> idefics3_preprocess(const Image& image, int64_t image_size, int64_t longest_edge,
                                          const float mean[3], const float std[3]);

// Pixel shuffle (llama.cpp build_patch_merge_permute; HF Idefics3 pixel_shuffle):
// x [h * w, n_embd] row-major patches -> out [(h/s) * (w/s), n_embd * s * s], each
// output row the s x s block (dy, dx) row-major: out[(by, bx)][(dy * s + dx) * n_embd + c].
// A side not divisible by s is zero-padded up to the next multiple.
void idefics3_pixel_shuffle(const float* x, int64_t n_embd, int64_t w, int64_t h, int64_t s, std::vector<float>& out);

// One element of the token layout that replaces an image marker, as libmtmd's
// MTMD_SLICE_TMPL_IDEFICS3 emits it: special token strings or the embeddings of tile
// `tile` (index into Idefics3Tiles). A tile's header "<fake_token_around_image><row_R_col_C>"
// comes from a text template that libmtmd tokenizes (tokenized = true, the strings
// concatenated); the row end "\n" and the global image's "\n\n" <fake_token_around_image>
// <global-img> ... <fake_token_around_image> are looked up one vocabulary token each
// (tokenized = false): tokenizing "\n" would add SPM's "▁" in front of it.
struct Idefics3LayoutItem {
  std::vector<std::string> tokens;  // empty for an image item
  bool tokenized = false;           // tokens are text to tokenize, not vocabulary entries
  int32_t tile = -1;                // >= 0 for an image item
};

// grid 2x2: <fake><row_1_col_1> [0] <fake><row_1_col_2> [1] \n <fake><row_2_col_1> [2]
// <fake><row_2_col_2> [3] \n\n <fake><global-img> [4] <fake>: "\n" after every row but the
// last (libmtmd's tok_row_end_trail is false for idefics3). A 0x0 grid keeps only the
// global part.
std::vector<Idefics3LayoutItem> idefics3_token_layout(int32_t grid_rows, int32_t grid_cols);

class Idefics3Projector {
 public:
  static Result<Idefics3Projector> load(const GgufFile& gguf);

  const VitHparams& hparams() const { return encoder_.hparams(); }
  int64_t scale_factor() const { return scale_; }
  int64_t longest_edge() const { return longest_edge_; }
  int64_t n_embd_out() const { return proj_.n_rows; }
  int64_t tokens_per_tile() const;

  // One tile [3, S, S] -> its pixel-shuffled ViT features [tokens_per_tile, n_embd * s * s]
  // (shuffled, may be null) and projected embeddings [tokens_per_tile, n_embd_out].
  Status encode_tile(const ImageTensor& tile, std::vector<float>* shuffled, std::vector<float>& embd,
                     ThreadPool& pool) const;

 private:
  SiglipEncoder encoder_;
  int64_t scale_ = 2;          // clip.vision.projector.scale_factor
  int64_t longest_edge_ = 0;   // clip.vision.preproc_image_size
  WeightMatrix proj_;          // mm.model.fc.weight [n_embd_out, n_embd * s * s]
};

}  // namespace vlkv
