// LLaVA-1.5 vision side (projector type "mlp"): a CLIP ViT whose features are
// taken at clip.vision.feature_layer (the penultimate layer when the key is
// absent, as llama.cpp does), class token dropped, then the two-layer MLP
// projector mm.2(gelu(mm.0(x))). One image becomes one run of n_patches tokens
// with no special tokens around it (LLaVA-1.5 has none).
#include <algorithm>
#include <set>

#include "kernels/ops.h"
#include "kernels/vit_ops.h"
#include "vision/vit_common_image.h"
#include "vision/vision_model.h"
#include "vision/vit.h"

namespace vlkv {
namespace {

class ClipMlpModel final : public VisionModel {
 public:
  static Result<std::unique_ptr<VisionModel>> load(const GgufFile& g) {
    auto m = std::unique_ptr<ClipMlpModel>(new ClipMlpModel());
    VLKV_ASSIGN_OR_RETURN(m->hp_, read_clip_vision_hparams(g));
    if (m->hp_.use_silu) return unsupported("the mlp projector with a SiLU ViT is not implemented");
    // Which layer outputs the projector reads: llama.cpp records the input of
    // layer il for each il in the set (0 = the embeddings), and the post-norm
    // output of the last layer run when that index is in it.
    if (m->hp_.feature_layers.empty()) {
      m->n_run_ = std::max<int64_t>(m->hp_.n_layers - 1, 1);
    } else {
      m->n_run_ = *std::max_element(m->hp_.feature_layers.begin(), m->hp_.feature_layers.end());
      m->n_run_ = std::max<int64_t>(m->n_run_, 1);
    }
    VLKV_ASSIGN_OR_RETURN(m->vit_weights_, bind_vit_weights(g, m->hp_, m->n_run_));
    const int64_t n_features = std::max<size_t>(m->hp_.feature_layers.size(), 1);
    const int64_t n_in = m->hp_.n_embd * n_features;
    const GgufTensorInfo* mm0 = g.find_tensor("mm.0.weight");
    const GgufTensorInfo* mm2 = g.find_tensor("mm.2.weight");
    if (!mm0 || !mm2 || mm0->dims.size() != 2 || mm2->dims.size() != 2) {
      return invalid_file("the mlp projector needs 2-D tensors mm.0.weight and mm.2.weight");
    }
    const int64_t n_hidden = mm0->dims[1];
    m->n_out_ = mm2->dims[1];
    VLKV_ASSIGN_OR_RETURN(m->mm0_, bind_vision_matrix(g, "mm.0.weight", n_in, n_hidden));
    VLKV_ASSIGN_OR_RETURN(m->mm0_b_, read_optional_vision_tensor(g, "mm.0.bias", {n_hidden}));
    VLKV_ASSIGN_OR_RETURN(m->mm2_, bind_vision_matrix(g, "mm.2.weight", n_hidden, m->n_out_));
    VLKV_ASSIGN_OR_RETURN(m->mm2_b_, read_optional_vision_tensor(g, "mm.2.bias", {m->n_out_}));
    m->vit_ = std::make_unique<Vit>(m->hp_, m->vit_weights_);
    return std::unique_ptr<VisionModel>(std::move(m));
  }

  std::string_view projector_type() const override { return "mlp"; }
  int64_t n_embd_out() const override { return n_out_; }

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
    const int64_t n = vit_->n_tokens();
    const bool has_class = !vit_weights_.class_embd.empty();
    const int64_t n_patches = n - (has_class ? 1 : 0);
    std::vector<float> x;  // [n, n_embd]
    vit_->embed(tensors[0], x, pool);

    const std::set<int64_t> wanted(hp_.feature_layers.begin(), hp_.feature_layers.end());
    std::vector<std::vector<float>> stack;  // each [n, n_embd]
    for (int64_t il = 0; il < n_run_; ++il) {
      if (wanted.count(il)) stack.push_back(x);
      vit_->layer(il, x, n, VitFfn::kGelu, pool);
    }
    vit_->post_norm(x, n);
    if (wanted.empty() || wanted.count(n_run_)) stack.push_back(x);

    // Features [n_patches, n_embd * n_stack]: class token dropped, layers side by side.
    const int64_t n_in = e * static_cast<int64_t>(stack.size());
    std::vector<float> features(static_cast<size_t>(n_patches * n_in));
    for (int64_t t = 0; t < n_patches; ++t) {
      for (size_t s = 0; s < stack.size(); ++s) {
        const float* src = &stack[s][static_cast<size_t>((t + (has_class ? 1 : 0)) * e)];
        std::copy_n(src, e, &features[static_cast<size_t>(t * n_in + static_cast<int64_t>(s) * e)]);
      }
    }
    std::vector<float> hidden(static_cast<size_t>(n_patches * mm0_.n_rows));  // [n_patches, n_hidden]
    linear(mm0_, mm0_b_, features.data(), n_patches, hidden.data(), pool);
    gelu(hidden.data(), static_cast<int64_t>(hidden.size()), hidden.data());

    MediaPiece piece;
    piece.kind = MediaPiece::Kind::kEmbeddings;
    piece.embd.n_tokens = n_patches;
    piece.embd.grid_h = piece.embd.grid_w = static_cast<int32_t>(vit_->n_patches_side());
    piece.embd.data.resize(static_cast<size_t>(n_patches * n_out_));  // [n_patches, n_out]
    linear(mm2_, mm2_b_, hidden.data(), n_patches, piece.embd.data.data(), pool);
    MediaEmbedding out;
    out.pieces.push_back(std::move(piece));
    return out;
  }

 private:
  ClipMlpModel() = default;
  ClipVisionHparams hp_;
  int64_t n_run_ = 0;  // ViT layers evaluated
  VitWeights vit_weights_;
  std::unique_ptr<Vit> vit_;
  WeightMatrix mm0_, mm2_;  // [n_hidden, n_in], [n_out, n_hidden]
  std::vector<float> mm0_b_, mm2_b_;
  int64_t n_out_ = 0;
};

VLKV_REGISTER_VISION_MODEL("mlp", ClipMlpModel::load);

}  // namespace
}  // namespace vlkv
