// The Qwen2-VL merger behind the VisionModel interface (registered as "qwen2vl_merger").
#include <memory>

#include "vision/qwen2vl_model.h"
#include "vision/vision_model.h"

namespace vlkv {
namespace {

class Qwen2VlVisionModel final : public VisionModel {
 public:
  explicit Qwen2VlVisionModel(Qwen2VlProjector p) : p_(std::move(p)) {}

  std::string_view projector_type() const override { return "qwen2vl_merger"; }
  int64_t n_embd_out() const override { return p_.n_embd_out(); }

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    VLKV_ASSIGN_OR_RETURN(ImageTensor t, p_.preprocess(image));
    std::vector<ImageTensor> out;
    out.push_back(std::move(t));
    return out;
  }

  // <|vision_start|> [grid_h * grid_w merged tokens] <|vision_end|>, as libmtmd frames it.
  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    VLKV_ASSIGN_OR_RETURN(ImageTensor t, p_.preprocess(image));
    MediaEmbedding out;
    out.pieces.push_back({MediaPiece::Kind::kText, "<|vision_start|>", {}});
    MediaPiece img;
    img.kind = MediaPiece::Kind::kEmbeddings;
    VLKV_RETURN_IF_ERROR(p_.encode(t, t, img.embd.data, pool));
    img.embd.grid_t = 1;
    img.embd.grid_h = static_cast<int32_t>(t.height / p_.align());
    img.embd.grid_w = static_cast<int32_t>(t.width / p_.align());
    img.embd.n_tokens = static_cast<int64_t>(img.embd.grid_h) * img.embd.grid_w;
    out.pieces.push_back(std::move(img));
    out.pieces.push_back({MediaPiece::Kind::kText, "<|vision_end|>", {}});
    return out;
  }

 private:
  Qwen2VlProjector p_;
};

Result<std::unique_ptr<VisionModel>> make_qwen2vl(const GgufFile& g) {
  VLKV_ASSIGN_OR_RETURN(Qwen2VlProjector p, Qwen2VlProjector::load(g));
  return std::unique_ptr<VisionModel>(new Qwen2VlVisionModel(std::move(p)));
}

VLKV_REGISTER_VISION_MODEL("qwen2vl_merger", make_qwen2vl);

}  // namespace
}  // namespace vlkv
