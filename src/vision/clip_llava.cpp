// LLaVA vision side (projector type "mlp"), as llama.cpp's llava graph computes it: a CLIP
// ViT whose features are taken at clip.vision.feature_layer (the penultimate layer when the
// key is absent), then the two-layer MLP projector mm.2(gelu(mm.0(x))). LLaVA-1.5 (no
// pinpoints): one image = one run of n_patches tokens, no special tokens around it.
// LLaVA-NeXT (clip.vision.image_grid_pinpoints): libmtmd's anyres tiles (llava_anyres.h),
// each through the ViT and projector as its own run, tiles row-major then the overview.
// The patch conv takes pixels and weights rounded to f16 as ggml's conv_2d does (with the
// f16 GELU tables of kernels/ops.h this puts the embeddings within ~1e-3 of llama.cpp's).
#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/ops.h"
#include "vision/llava_anyres.h"
#include "vision/mmproj_key_audit.h"
#include "vision/vision_model.h"
#include "vision/vit_common.h"
#include "vision/vit_common_image.h"

namespace vlkv {
namespace {

void round_to_f16(std::vector<float>& v) {
  for (float& x : v) x = fp16_to_fp32(fp32_to_fp16(x));
}

class ClipMlpModel final : public VisionModel {
 public:
  static Result<std::unique_ptr<VisionModel>> load(const GgufFile& g) {
    auto m = std::unique_ptr<ClipMlpModel>(new ClipMlpModel());
    VLKV_ASSIGN_OR_RETURN(m->hp_, read_vit_hparams(g));
    const VitHparams& hp = m->hp_;
    if (hp.ffn_op == VitFfnOp::kSilu) {
      return unsupported("mmproj: 'clip.use_silu' = true (a SiLU ViT) is not implemented for the mlp projector");
    }
    VLKV_RETURN_IF_ERROR(refuse_unimplemented_vit_keys(g, hp));
    VLKV_RETURN_IF_ERROR(refuse_swapped_vit_ffn(g, hp));
    // llama.cpp turns an mlp file with mm.3 into its Yi-style mlp_norm projector (LayerNorms
    // after each linear), which is not implemented here.
    if (g.find_tensor("mm.3.weight")) {
      return unsupported("mmproj: tensor 'mm.3.weight' makes this an mlp_norm (Yi-VL style) projector, which is "
                         "not supported");
    }
    VLKV_ASSIGN_OR_RETURN(m->pinpoints_, read_image_grid_pinpoints(g, hp.image_size));
    // Which layer outputs the projector reads: llama.cpp records the input of
    // layer il for each il in the set (0 = the embeddings), and the post-norm
    // output of the last layer run when that index is in it.
    if (hp.feature_layers.empty()) {
      m->n_run_ = std::max<int64_t>(hp.n_layers - 1, 1);
    } else {
      m->n_run_ = std::max<int64_t>(*std::max_element(hp.feature_layers.begin(), hp.feature_layers.end()), 1);
    }
    const int64_t e = hp.n_embd;
    const int64_t side = hp.image_size / hp.patch_size;
    VLKV_ASSIGN_OR_RETURN(WeightMatrix kernel, bind_vit_patch_kernel(g, "v.patch_embd.weight", hp.patch_size, e));
    // An owned f32 copy of the kernel rounded to f16 (ggml_conv_2d's im2col is f16);
    // patch_kernel_ views it, so the model must not move (it lives behind the unique_ptr).
    const int64_t k_cols = kernel.n_cols;
    m->patch_kernel_f16_.resize(static_cast<size_t>(kernel.n_rows * k_cols));
    for (int64_t r = 0; r < kernel.n_rows; ++r) get_row(kernel, r, &m->patch_kernel_f16_[static_cast<size_t>(r * k_cols)]);
    round_to_f16(m->patch_kernel_f16_);
    m->patch_kernel_ = {GgmlType::kF32, reinterpret_cast<const uint8_t*>(m->patch_kernel_f16_.data()), kernel.n_rows,
                        kernel.n_cols, sizeof(float) * static_cast<size_t>(kernel.n_cols)};
    VLKV_ASSIGN_OR_RETURN(m->patch_b_, bind_vit_vector_optional(g, "v.patch_embd.bias", e));
    VLKV_ASSIGN_OR_RETURN(m->class_embd_, bind_vit_vector_optional(g, "v.class_embd", e));
    m->n_tokens_ = side * side + (m->class_embd_.empty() ? 0 : 1);
    VLKV_ASSIGN_OR_RETURN(m->pos_embd_, bind_vit_matrix(g, "v.position_embd.weight", e, m->n_tokens_));
    VLKV_ASSIGN_OR_RETURN(m->pre_ln_w_, bind_vit_vector_optional(g, "v.pre_ln.weight", e));
    VLKV_ASSIGN_OR_RETURN(m->pre_ln_b_, bind_vit_vector_optional(g, "v.pre_ln.bias", e));
    VLKV_ASSIGN_OR_RETURN(m->post_ln_w_, bind_vit_vector_optional(g, "v.post_ln.weight", e));
    VLKV_ASSIGN_OR_RETURN(m->post_ln_b_, bind_vit_vector_optional(g, "v.post_ln.bias", e));
    VLKV_ASSIGN_OR_RETURN(m->layers_, bind_vit_layers(g, hp));
    const int64_t n_features = std::max<size_t>(hp.feature_layers.size(), 1);
    const int64_t n_in = e * n_features;
    const GgufTensorInfo* mm0 = g.find_tensor("mm.0.weight");
    const GgufTensorInfo* mm2 = g.find_tensor("mm.2.weight");
    if (!mm0 || !mm2 || mm0->dims.size() != 2 || mm2->dims.size() != 2) {
      return invalid_file("the mlp projector needs 2-D tensors mm.0.weight and mm.2.weight");
    }
    const int64_t n_hidden = mm0->dims[1];
    VLKV_ASSIGN_OR_RETURN(m->mm0_, bind_vit_matrix(g, "mm.0.weight", n_in, n_hidden));
    VLKV_ASSIGN_OR_RETURN(m->mm0_b_, bind_vit_vector_optional(g, "mm.0.bias", n_hidden));
    VLKV_ASSIGN_OR_RETURN(m->mm2_, bind_vit_matrix(g, "mm.2.weight", n_hidden, mm2->dims[1]));
    VLKV_ASSIGN_OR_RETURN(m->mm2_b_, bind_vit_vector_optional(g, "mm.2.bias", mm2->dims[1]));
    return std::unique_ptr<VisionModel>(std::move(m));
  }

  std::string_view projector_type() const override { return "mlp"; }
  int64_t n_embd_out() const override { return mm2_.n_rows; }

  // Without pinpoints (LLaVA-1.5) llama.cpp pads to a square with LLaVA's mean colour and
  // fits image_size (bicubic); a square image of the right size is only normalised. With
  // pinpoints: the anyres tiles, then the overview.
  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    if (!image.valid()) return invalid_argument("empty or inconsistent image");
    const int32_t side = static_cast<int32_t>(hp_.image_size);
    std::vector<ImageTensor> out;
    if (!pinpoints_.empty()) {
      VLKV_ASSIGN_OR_RETURN(LlavaAnyresTiles tiles, llava_anyres_tiles(image, side, pinpoints_));
      for (const Image& t : tiles.images) out.push_back(normalize_image(t, hp_.image_mean, hp_.image_std));
      return out;
    }
    constexpr std::array<uint8_t, 3> kLlavaPad = {122, 116, 104};  // LLaVA's mean colour
    if (image.width == side && image.height == side) {
      out.push_back(normalize_image(image, hp_.image_mean, hp_.image_std));
    } else {
      const Image fitted = resize_image_padded(image, side, side, ResizeAlgo::kBicubic, kLlavaPad);
      out.push_back(normalize_image(fitted, hp_.image_mean, hp_.image_std));
    }
    return out;
  }

  // One run of the tile's patches per tile (LLaVA-1.5: the one fitted image), no framing.
  Result<MediaEmbedding> layout_image(int32_t width, int32_t height) const override {
    if (width <= 0 || height <= 0) return invalid_argument("empty or inconsistent image");
    int64_t n_runs = 1;
    if (!pinpoints_.empty()) {
      VLKV_ASSIGN_OR_RETURN(LlavaAnyresTiles grid, llava_anyres_grid({width, height},
                                                                     static_cast<int32_t>(hp_.image_size), pinpoints_));
      n_runs += static_cast<int64_t>(grid.grid_rows) * grid.grid_cols;
    }
    const int32_t side = static_cast<int32_t>(hp_.image_size / hp_.patch_size);
    const int64_t n_patches = n_tokens_ - (class_embd_.empty() ? 0 : 1);
    MediaEmbedding out;
    for (int64_t i = 0; i < n_runs; ++i) out.pieces.push_back(embedding_layout_piece(n_patches, side, side));
    return out;
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding out, layout_image(image.width, image.height));
    VLKV_ASSIGN_OR_RETURN(std::vector<ImageTensor> tensors, preprocess(image));
    if (tensors.size() != out.pieces.size()) return Status(StatusCode::kInternal, "mlp: tiles disagree with the layout");
    for (size_t i = 0; i < tensors.size(); ++i) {
      VLKV_ASSIGN_OR_RETURN(EmbeddingRun run, encode_tile(tensors[i], pool));
      if (run.n_tokens != out.pieces[i].embd.n_tokens) return Status(StatusCode::kInternal, "mlp: run size disagrees with the layout");
      out.pieces[i].embd = std::move(run);
    }
    return out;
  }

  // One image_size x image_size tile through the ViT and the projector.
  Result<EmbeddingRun> encode_tile(const ImageTensor& tile, ThreadPool& pool) const {
    if (tile.width != hp_.image_size || tile.height != hp_.image_size) {
      return invalid_argument("mlp projector: a tile must be " + std::to_string(hp_.image_size) + "x" +
                              std::to_string(hp_.image_size));
    }
    const int64_t e = hp_.n_embd;
    const int64_t n = n_tokens_;
    const int64_t has_cls = class_embd_.empty() ? 0 : 1;
    const int64_t n_patches = n - has_cls;

    // Embeddings [n, n_embd] in llama.cpp's order: the patches row-major, then the class
    // token (ggml_concat(patches, class_embd)); learned position row t is added to token t,
    // then the pre-LayerNorm. (HF CLIP puts the class token first; the GGUF positions are
    // used as llama.cpp uses them, since that is what converted files are run with.)
    std::vector<float> x(static_cast<size_t>(n * e));
    ImageTensor tile_f16 = tile;  // ggml's conv_2d takes the pixels as f16 (im2col)
    round_to_f16(tile_f16.data);
    vit_patch_embed(tile_f16, hp_.patch_size, patch_kernel_, x.data(), pool);
    add_bias_rows(x.data(), patch_b_, n_patches, e);
    if (has_cls) std::copy(class_embd_.begin(), class_embd_.end(), x.begin() + n_patches * e);
    std::vector<float> pos(static_cast<size_t>(e));  // [n_embd] one learned position
    for (int64_t t = 0; t < n; ++t) {
      get_row(pos_embd_, t, pos.data());
      add_inplace(&x[static_cast<size_t>(t * e)], pos.data(), e);
    }
    if (!pre_ln_w_.empty()) vit_layer_norm_rows(x.data(), pre_ln_w_, pre_ln_b_, n, e, hp_.eps, x.data());

    const std::set<int64_t> wanted(hp_.feature_layers.begin(), hp_.feature_layers.end());
    std::vector<std::vector<float>> stack;  // each [n, n_embd]
    VitScratch scratch;  // one set of block buffers for every layer
    for (int64_t il = 0; il < n_run_; ++il) {
      if (wanted.count(il)) stack.push_back(x);
      vit_block(hp_, layers_[static_cast<size_t>(il)], x.data(), n, VitRope(), pool, nullptr, &scratch);
    }
    if (!post_ln_w_.empty()) vit_layer_norm_rows(x.data(), post_ln_w_, post_ln_b_, n, e, hp_.eps, x.data());
    if (wanted.empty() || wanted.count(n_run_)) stack.push_back(x);

    // Features [n_patches, n_embd * n_stack], layers side by side. llama.cpp's projector
    // reads rows has_cls .. has_cls + n_patches - 1: with a class token that is patches
    // 1..n_patches-1 followed by the class token (patch 0 is dropped), as it runs.
    const int64_t n_in = e * static_cast<int64_t>(stack.size());
    std::vector<float> features(static_cast<size_t>(n_patches * n_in));
    for (int64_t t = 0; t < n_patches; ++t) {
      for (size_t s = 0; s < stack.size(); ++s) {
        const float* src = &stack[s][static_cast<size_t>((t + has_cls) * e)];
        std::copy_n(src, e, &features[static_cast<size_t>(t * n_in + static_cast<int64_t>(s) * e)]);
      }
    }
    std::vector<float> hidden(static_cast<size_t>(n_patches * mm0_.n_rows));  // [n_patches, n_hidden]
    matmul(mm0_, features.data(), n_patches, hidden.data(), pool);
    add_bias_rows(hidden.data(), mm0_b_, n_patches, mm0_.n_rows);
    gelu(hidden.data(), static_cast<int64_t>(hidden.size()), hidden.data());

    EmbeddingRun run;
    run.n_tokens = n_patches;
    run.grid_h = run.grid_w = static_cast<int32_t>(hp_.image_size / hp_.patch_size);
    run.data.resize(static_cast<size_t>(n_patches * mm2_.n_rows));  // [n_patches, n_out]
    matmul(mm2_, hidden.data(), n_patches, run.data.data(), pool);
    add_bias_rows(run.data.data(), mm2_b_, n_patches, mm2_.n_rows);
    return run;
  }

 private:
  ClipMlpModel() = default;
  VitHparams hp_;
  int64_t n_run_ = 0;     // ViT layers evaluated
  int64_t n_tokens_ = 0;  // patches (+1 with a class token)
  std::vector<ImageSize> pinpoints_;  // clip.vision.image_grid_pinpoints (empty: LLaVA-1.5)
  std::vector<float> patch_kernel_f16_;       // [n_embd, 3 * patch * patch] rounded to f16, as ggml's conv
  WeightMatrix patch_kernel_;                 // view of patch_kernel_f16_
  std::vector<float> patch_b_, class_embd_;   // [n_embd] (each may be empty)
  WeightMatrix pos_embd_;                     // [n_tokens, n_embd]
  std::vector<float> pre_ln_w_, pre_ln_b_, post_ln_w_, post_ln_b_;  // [n_embd] (may be empty)
  std::vector<VitLayer> layers_;
  WeightMatrix mm0_, mm2_;  // [n_hidden, n_in], [n_out, n_hidden]
  std::vector<float> mm0_b_, mm2_b_;
};

VLKV_REGISTER_VISION_MODEL("mlp", ClipMlpModel::load);

}  // namespace
}  // namespace vlkv
