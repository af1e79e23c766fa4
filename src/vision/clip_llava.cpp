// LLaVA-1.5 vision side (projector type "mlp"): a CLIP ViT whose features are
// taken at clip.vision.feature_layer (the penultimate layer when the key is
// absent, as llama.cpp does), class token dropped, then the two-layer MLP
// projector mm.2(gelu(mm.0(x))). One image becomes one run of n_patches tokens
// with no special tokens around it (LLaVA-1.5 has none).
#include <algorithm>
#include <array>
#include <set>

#include "kernels/ops.h"
#include "vision/vision_model.h"
#include "vision/vit_common.h"
#include "vision/vit_common_image.h"

namespace vlkv {
namespace {

class ClipMlpModel final : public VisionModel {
 public:
  static Result<std::unique_ptr<VisionModel>> load(const GgufFile& g) {
    auto m = std::unique_ptr<ClipMlpModel>(new ClipMlpModel());
    VLKV_ASSIGN_OR_RETURN(m->hp_, read_vit_hparams(g));
    const VitHparams& hp = m->hp_;
    if (hp.ffn_op == VitFfnOp::kSilu) return unsupported("the mlp projector with a SiLU ViT is not implemented");
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
    VLKV_ASSIGN_OR_RETURN(m->patch_kernel_, bind_vit_patch_kernel(g, "v.patch_embd.weight", hp.patch_size, e));
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

  // LLaVA pads to a square with its mean colour, then fits image_size (llama.cpp's
  // default path); a square image of the right size is only normalised.
  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    if (!image.valid()) return invalid_argument("empty or inconsistent image");
    const int32_t side = static_cast<int32_t>(hp_.image_size);
    constexpr std::array<uint8_t, 3> kLlavaPad = {122, 116, 104};  // LLaVA's mean colour
    std::vector<ImageTensor> out;
    if (image.width == side && image.height == side) {
      out.push_back(normalize_image(image, hp_.image_mean, hp_.image_std));
    } else {
      const Image fitted = resize_image_padded(image, side, side, ResizeAlgo::kBicubic, kLlavaPad);
      out.push_back(normalize_image(fitted, hp_.image_mean, hp_.image_std));
    }
    return out;
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    VLKV_ASSIGN_OR_RETURN(std::vector<ImageTensor> tensors, preprocess(image));
    const int64_t e = hp_.n_embd;
    const int64_t n = n_tokens_;
    const int64_t first = class_embd_.empty() ? 0 : 1;
    const int64_t n_patches = n - first;

    // Embeddings [n, n_embd]: class token first when present, then the patches
    // row-major; learned positions added, then the pre-LayerNorm.
    std::vector<float> x(static_cast<size_t>(n * e));
    vit_patch_embed(tensors[0], hp_.patch_size, patch_kernel_, &x[static_cast<size_t>(first * e)], pool);
    add_bias_rows(&x[static_cast<size_t>(first * e)], patch_b_, n_patches, e);
    if (first) std::copy(class_embd_.begin(), class_embd_.end(), x.begin());
    std::vector<float> pos(static_cast<size_t>(e));  // [n_embd] one learned position
    for (int64_t t = 0; t < n; ++t) {
      get_row(pos_embd_, t, pos.data());
      add_inplace(&x[static_cast<size_t>(t * e)], pos.data(), e);
    }
    if (!pre_ln_w_.empty()) vit_layer_norm_rows(x.data(), pre_ln_w_, pre_ln_b_, n, e, hp_.eps, x.data());

    const std::set<int64_t> wanted(hp_.feature_layers.begin(), hp_.feature_layers.end());
    std::vector<std::vector<float>> stack;  // each [n, n_embd]
    for (int64_t il = 0; il < n_run_; ++il) {
      if (wanted.count(il)) stack.push_back(x);
      vit_block(hp_, layers_[static_cast<size_t>(il)], x.data(), n, VitRope(), pool);
    }
    if (!post_ln_w_.empty()) vit_layer_norm_rows(x.data(), post_ln_w_, post_ln_b_, n, e, hp_.eps, x.data());
    if (wanted.empty() || wanted.count(n_run_)) stack.push_back(x);

    // Features [n_patches, n_embd * n_stack]: class token dropped, layers side by side.
    const int64_t n_in = e * static_cast<int64_t>(stack.size());
    std::vector<float> features(static_cast<size_t>(n_patches * n_in));
    for (int64_t t = 0; t < n_patches; ++t) {
      for (size_t s = 0; s < stack.size(); ++s) {
        const float* src = &stack[s][static_cast<size_t>((t + first) * e)];
        std::copy_n(src, e, &features[static_cast<size_t>(t * n_in + static_cast<int64_t>(s) * e)]);
      }
    }
    std::vector<float> hidden(static_cast<size_t>(n_patches * mm0_.n_rows));  // [n_patches, n_hidden]
    matmul(mm0_, features.data(), n_patches, hidden.data(), pool);
    add_bias_rows(hidden.data(), mm0_b_, n_patches, mm0_.n_rows);
    gelu(hidden.data(), static_cast<int64_t>(hidden.size()), hidden.data());

    MediaPiece piece;
    piece.kind = MediaPiece::Kind::kEmbeddings;
    piece.embd.n_tokens = n_patches;
    piece.embd.grid_h = piece.embd.grid_w = static_cast<int32_t>(hp_.image_size / hp_.patch_size);
    piece.embd.data.resize(static_cast<size_t>(n_patches * mm2_.n_rows));  // [n_patches, n_out]
    matmul(mm2_, hidden.data(), n_patches, piece.embd.data.data(), pool);
    add_bias_rows(piece.embd.data.data(), mm2_b_, n_patches, mm2_.n_rows);
    MediaEmbedding out;
    out.pieces.push_back(std::move(piece));
    return out;
  }

 private:
  ClipMlpModel() = default;
  VitHparams hp_;
  int64_t n_run_ = 0;     // ViT layers evaluated
  int64_t n_tokens_ = 0;  // patches (+1 with a class token)
  WeightMatrix patch_kernel_;                 // [n_embd, 3 * patch * patch]
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
