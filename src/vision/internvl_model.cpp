#include "vision/internvl_model.h"

#include <algorithm>
#include <limits>
#include <string>

#include "base/fp16.h"
#include "kernels/ops.h"
#include "vision/idefics3_model.h"
#include "vision/vit_common_image.h"

namespace vlkv {
namespace {

// llama.cpp's InternVL projector LayerNorm uses PyTorch's default eps, whatever the file says.
constexpr float kMlpNormEps = 1e-5f;
constexpr int64_t kMaxTiles = 1024;  // bounds the candidate list and the tiles of one image

// Reads an optional non-negative integer key; fallback when absent.
Result<int64_t> optional_i64(const GgufFile& g, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  Result<int64_t> v = g.get_i64(key);
  if (!v.is_ok()) {
    if (v.status().code() == StatusCode::kNotFound) return fallback;
    return v.status();
  }
  if (*v < lo || *v > hi) {
    return invalid_file(std::string("mmproj: '") + key + "' = " + std::to_string(*v) + " is out of range [" +
                        std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return *v;
}

// Tensors llama.cpp's build_vit would use that this encoder does not implement: refused by
// name rather than ignored (each changes the computation).
Status refuse_unimplemented_tensors(const GgufFile& g, const VitHparams& hp) {
  static constexpr const char* kPerLayer[] = {
      "attn_qkv.weight",        // fused QKV
      "attn_q_norm.weight",     // q/k normalisation (InternViT-6B's qk_normalization)
      "attn_k_norm.weight",
      "attn_post_norm.weight",  // post-attention / post-FFN norms
      "ffn_post_norm.weight",
      "out_scale.weight",       // layer output scale
      "ffn_gate_exps.weight",   // mixture-of-experts FFN
  };
  for (int64_t il = 0; il < hp.n_layers; ++il) {
    for (const char* suffix : kPerLayer) {
      const std::string name = "v.blk." + std::to_string(il) + "." + suffix;
      if (g.find_tensor(name)) {
        return unsupported("mmproj: the internvl projector with tensor '" + name + "' is not implemented");
      }
    }
  }
  Result<int64_t> n_head_kv = g.get_i64("clip.vision.attention.head_count_kv");
  if (n_head_kv.is_ok() && *n_head_kv != hp.n_heads) {
    return unsupported("mmproj: clip.vision.attention.head_count_kv = " + std::to_string(*n_head_kv) +
                       " (grouped-query attention in the ViT) is not implemented");
  }
  return Status::ok();
}

// x rounded to the nearest f16 value, kept as f32.
inline float round_f16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

}  // namespace

std::vector<ImageSize> internvl_resolution_candidates(int32_t tile_size, int32_t min_tiles, int32_t max_tiles,
                                                      const std::vector<ImageSize>& pinpoints) {
  std::vector<ImageSize> out = pinpoints;
  if (min_tiles < 1) return out;
  for (int32_t a = min_tiles; a <= max_tiles; ++a) {
    const int32_t b_lo = std::max((min_tiles + a - 1) / a, min_tiles);
    const int32_t b_hi = std::min(max_tiles / a, max_tiles);
    for (int32_t b = b_lo; b <= b_hi; ++b) out.push_back({a * tile_size, b * tile_size});
  }
  return out;
}

Result<InternvlTiles> internvl_grid(int32_t width, int32_t height, int32_t tile_size,
                                    const std::vector<ImageSize>& candidates) {
  if (width <= 0 || height <= 0) return invalid_argument("internvl: empty or malformed image");
  if (candidates.empty()) return invalid_argument("internvl: no tile grid candidates");
  const int32_t s = tile_size;
  InternvlTiles out;
  if (width > s || height > s) {
    const ImageSize refined = select_best_resolution({width, height}, candidates);
    // llama.cpp cuts min(S, rest)-sized slices; candidates are multiples of S (pinpoints too
    // for the ViT's fixed size), so every slice is S x S.
    if (refined.width % s != 0 || refined.height % s != 0) {
      return invalid_argument("internvl: tile canvas " + std::to_string(refined.width) + "x" +
                              std::to_string(refined.height) + " is not a multiple of the tile size " +
                              std::to_string(s) + " (from clip.vision.image_grid_pinpoints)");
    }
    out.grid_cols = refined.width / s;
    out.grid_rows = refined.height / s;
  }
  return out;
}

Result<InternvlTiles> internvl_preprocess(const Image& image, int32_t tile_size, const std::vector<ImageSize>& candidates,
                                          const float mean[3], const float std[3]) {
  if (!image.valid()) return invalid_argument("internvl: empty or malformed image");
  VLKV_ASSIGN_OR_RETURN(InternvlTiles out, internvl_grid(image.width, image.height, tile_size, candidates));
  const int32_t s = tile_size;
  if (out.grid_cols > 0) {
    const ImageSize refined{out.grid_cols * s, out.grid_rows * s};
    const Image canvas = resize_image_padded(image, refined.width, refined.height, ResizeAlgo::kBicubic, {0, 0, 0});
    for (int32_t y = 0; y < refined.height; y += s) {
      for (int32_t x = 0; x < refined.width; x += s) {
        out.tensors.push_back(normalize_image(crop_image(canvas, x, y, s, s), mean, std));
      }
    }
  }
  out.tensors.push_back(normalize_image(resize_image(image, s, s, ResizeAlgo::kBilinear), mean, std));
  return out;
}

Result<InternvlProjector> InternvlProjector::load(const GgufFile& g) {
  InternvlProjector p;
  VLKV_ASSIGN_OR_RETURN(p.hp_, read_vit_hparams(g));
  VitHparams& hp = p.hp_;
  if (hp.projector_type != "internvl") return invalid_file("mmproj: projector type is not internvl");
  // llama.cpp: the 6B InternViT (InternVL 2.5/3 26B-78B) uses RMSNorm, recognised by its shape.
  if (hp.n_embd == 3200 && hp.n_layers == 45) hp.norm = VitNorm::kRms;
  VLKV_RETURN_IF_ERROR(refuse_unimplemented_tensors(g, hp));

  VLKV_ASSIGN_OR_RETURN(p.scale_, optional_i64(g, "clip.vision.projector.scale_factor", 1, 1, 16));
  const int64_t side = hp.image_size / hp.patch_size;
  if (side % p.scale_ != 0) {
    return unsupported("mmproj: clip.vision.projector.scale_factor " + std::to_string(p.scale_) +
                       " does not divide the " + std::to_string(side) + " patches per tile side");
  }
  VLKV_ASSIGN_OR_RETURN(int64_t min_tiles, optional_i64(g, "clip.vision.preproc_min_tiles", 1, 1, kMaxTiles));
  VLKV_ASSIGN_OR_RETURN(int64_t max_tiles, optional_i64(g, "clip.vision.preproc_max_tiles", 12, 1, kMaxTiles));
  if (min_tiles > max_tiles) return invalid_file("mmproj: clip.vision.preproc_min_tiles > preproc_max_tiles");
  std::vector<ImageSize> pinpoints;
  Result<std::vector<int64_t>> pp = g.get_i64_array("clip.vision.image_grid_pinpoints");
  if (pp.is_ok()) {
    if (pp->size() % 2 != 0) return invalid_file("mmproj: clip.vision.image_grid_pinpoints has an odd length");
    for (size_t i = 0; i < pp->size(); i += 2) {
      const int64_t w = (*pp)[i], h = (*pp)[i + 1];
      if (w <= 0 || h <= 0 || w > kMaxTiles * hp.image_size || h > kMaxTiles * hp.image_size) {
        return invalid_file("mmproj: clip.vision.image_grid_pinpoints holds an out-of-range size");
      }
      pinpoints.push_back({static_cast<int32_t>(w), static_cast<int32_t>(h)});
    }
  } else if (pp.status().code() != StatusCode::kNotFound) {
    return pp.status();
  }
  p.candidates_ = internvl_resolution_candidates(static_cast<int32_t>(hp.image_size), static_cast<int32_t>(min_tiles),
                                                 static_cast<int32_t>(max_tiles), pinpoints);

  const int64_t e = hp.n_embd;
  VLKV_ASSIGN_OR_RETURN(WeightMatrix kernel, bind_vit_patch_kernel(g, "v.patch_embd.weight", hp.patch_size, e));
  p.patch_kernel_f16_.resize(static_cast<size_t>(kernel.n_rows * kernel.n_cols));
  for (int64_t r = 0; r < kernel.n_rows; ++r) {
    float* row = &p.patch_kernel_f16_[static_cast<size_t>(r * kernel.n_cols)];
    get_row(kernel, r, row);
    for (int64_t c = 0; c < kernel.n_cols; ++c) row[c] = round_f16(row[c]);
  }
  VLKV_ASSIGN_OR_RETURN(p.patch_b_, bind_vit_vector_optional(g, "v.patch_embd.bias", e));
  VLKV_ASSIGN_OR_RETURN(p.class_embd_, bind_vit_vector(g, "v.class_embd", e));
  VLKV_ASSIGN_OR_RETURN(p.pos_embd_, bind_vit_matrix(g, "v.position_embd.weight", e, side * side + 1));
  VLKV_ASSIGN_OR_RETURN(p.pre_ln_w_, bind_vit_vector_optional(g, "v.pre_ln.weight", e));
  VLKV_ASSIGN_OR_RETURN(p.pre_ln_b_, bind_vit_vector_optional(g, "v.pre_ln.bias", e));
  VLKV_ASSIGN_OR_RETURN(p.post_ln_w_, bind_vit_vector_optional(g, "v.post_ln.weight", e));
  VLKV_ASSIGN_OR_RETURN(p.post_ln_b_, bind_vit_vector_optional(g, "v.post_ln.bias", e));
  VLKV_ASSIGN_OR_RETURN(p.layers_, bind_vit_layers(g, hp));

  const int64_t n_in = e * p.scale_ * p.scale_;
  const GgufTensorInfo* mlp1 = g.find_tensor("mm.model.mlp.1.weight");
  const GgufTensorInfo* mlp3 = g.find_tensor("mm.model.mlp.3.weight");
  if (!mlp1 || !mlp3 || mlp1->dims.size() != 2 || mlp3->dims.size() != 2) {
    return invalid_file("mmproj: the internvl projector needs 2-D tensors mm.model.mlp.1.weight and mm.model.mlp.3.weight");
  }
  const int64_t n_hidden = mlp1->dims[1];
  VLKV_ASSIGN_OR_RETURN(p.mlp0_w_, bind_vit_vector(g, "mm.model.mlp.0.weight", n_in));
  VLKV_ASSIGN_OR_RETURN(p.mlp0_b_, bind_vit_vector(g, "mm.model.mlp.0.bias", n_in));
  VLKV_ASSIGN_OR_RETURN(p.mlp1_, bind_vit_matrix(g, "mm.model.mlp.1.weight", n_in, n_hidden));
  VLKV_ASSIGN_OR_RETURN(p.mlp1_b_, bind_vit_vector(g, "mm.model.mlp.1.bias", n_hidden));
  VLKV_ASSIGN_OR_RETURN(p.mlp3_, bind_vit_matrix(g, "mm.model.mlp.3.weight", n_hidden, mlp3->dims[1]));
  VLKV_ASSIGN_OR_RETURN(p.mlp3_b_, bind_vit_vector(g, "mm.model.mlp.3.bias", mlp3->dims[1]));
  return p;
}

Result<InternvlTiles> InternvlProjector::preprocess(const Image& image) const {
  return internvl_preprocess(image, static_cast<int32_t>(hp_.image_size), candidates_, hp_.image_mean, hp_.image_std);
}

Result<InternvlTiles> InternvlProjector::grid(int32_t width, int32_t height) const {
  return internvl_grid(width, height, static_cast<int32_t>(hp_.image_size), candidates_);
}

Status InternvlProjector::encode_tile(const ImageTensor& tile, std::vector<float>& embd, ThreadPool& pool) const {
  if (tile.width != hp_.image_size || tile.height != hp_.image_size ||
      tile.data.size() != static_cast<size_t>(3) * tile.width * tile.height) {
    return invalid_argument("InternViT input must be 3 x " + std::to_string(hp_.image_size) + " x " +
                            std::to_string(hp_.image_size));
  }
  const int64_t e = hp_.n_embd;
  const int64_t side = hp_.image_size / hp_.patch_size;
  const int64_t n_patches = side * side;
  const int64_t n = n_patches + 1;

  // Tokens [n, n_embd]: the patches row-major, then the class token (llama.cpp appends it,
  // so patch i takes position row i and the class token the last row; HF puts it first).
  // The patch conv as ggml's CPU conv_2d: im2col to f16, so pixels and kernel are rounded to
  // f16 and the products summed in f32 (README-batch2 item 1: 2e-3 -> 2e-4 from llama.cpp).
  ImageTensor rounded = tile;
  for (float& v : rounded.data) v = round_f16(v);
  const int64_t n_cols = 3 * hp_.patch_size * hp_.patch_size;
  const WeightMatrix kernel{GgmlType::kF32, reinterpret_cast<const uint8_t*>(patch_kernel_f16_.data()), e, n_cols,
                            sizeof(float) * static_cast<size_t>(n_cols)};
  std::vector<float> x(static_cast<size_t>(n * e));
  vit_patch_embed(rounded, hp_.patch_size, kernel, x.data(), pool);
  add_bias_rows(x.data(), patch_b_, n_patches, e);
  std::copy(class_embd_.begin(), class_embd_.end(), x.begin() + n_patches * e);
  std::vector<float> pos(static_cast<size_t>(e));  // [n_embd] one learned position
  for (int64_t t = 0; t < n; ++t) {
    get_row(pos_embd_, t, pos.data());
    add_inplace(&x[static_cast<size_t>(t * e)], pos.data(), e);
  }
  if (!pre_ln_w_.empty()) vit_norm_rows(hp_, x.data(), pre_ln_w_, pre_ln_b_, n, x.data());
  VitScratch scratch;  // one set of block buffers for every layer
  for (const VitLayer& l : layers_) vit_block(hp_, l, x.data(), n, VitRope(), pool, nullptr, &scratch);
  if (!post_ln_w_.empty()) vit_norm_rows(hp_, x.data(), post_ln_w_, post_ln_b_, n, x.data());

  // Class token dropped (the first n_patches rows kept), then the pixel shuffle: each output
  // row is an s x s block of patches, (dy, dx) row-major, as llama.cpp's reshape/permute.
  std::vector<float> shuffled;  // [tokens_per_tile, n_embd * s * s]
  idefics3_pixel_shuffle(x.data(), e, side, side, scale_, shuffled);
  const int64_t n_tok = tokens_per_tile();
  const int64_t n_in = e * scale_ * scale_;
  vit_layer_norm_rows(shuffled.data(), mlp0_w_, mlp0_b_, n_tok, n_in, kMlpNormEps, shuffled.data());
  std::vector<float> hidden(static_cast<size_t>(n_tok * mlp1_.n_rows));  // [n_tok, n_hidden]
  matmul(mlp1_, shuffled.data(), n_tok, hidden.data(), pool);
  add_bias_rows(hidden.data(), mlp1_b_, n_tok, mlp1_.n_rows);
  gelu(hidden.data(), static_cast<int64_t>(hidden.size()), hidden.data());  // always GELU, as llama.cpp
  embd.resize(static_cast<size_t>(n_tok * mlp3_.n_rows));
  matmul(mlp3_, hidden.data(), n_tok, embd.data(), pool);
  add_bias_rows(embd.data(), mlp3_b_, n_tok, mlp3_.n_rows);
  return Status::ok();
}

}  // namespace vlkv
