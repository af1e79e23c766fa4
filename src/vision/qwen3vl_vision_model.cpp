// The Qwen3-VL merger behind the VisionModel interface (registered as "qwen3vl_merger").
// An image becomes <|vision_start|> [grid_h * grid_w merged tokens] <|vision_end|> as
// libmtmd frames it; each token's row carries the deepstack parts after its embedding.
// Video is refused: Qwen3-VL interleaves timestamp text between frames and gives each
// frame its own temporal position, which vlkv does not build yet.
#include <memory>

#include "vision/qwen3vl_model.h"
#include "vision/vision_model.h"

namespace vlkv {
namespace {

class Qwen3VlVisionModel final : public VisionModel {
 public:
  explicit Qwen3VlVisionModel(Qwen3VlProjector p) : p_(std::move(p)) {}

  std::string_view projector_type() const override { return p_.hparams().projector_type; }
  int64_t n_embd_out() const override { return p_.n_embd_out(); }

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    VLKV_ASSIGN_OR_RETURN(ImageTensor t, p_.preprocess(image));
    std::vector<ImageTensor> out;
    out.push_back(std::move(t));
    return out;
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    VLKV_ASSIGN_OR_RETURN(ImageTensor t, p_.preprocess(image));
    MediaEmbedding out;
    out.pieces.push_back(MediaPiece::text_piece("<|vision_start|>"));
    MediaPiece img;
    img.kind = MediaPiece::Kind::kEmbeddings;
    VLKV_RETURN_IF_ERROR(p_.encode(t, t, img.embd.data, pool));
    img.embd.grid_t = 1;
    img.embd.grid_h = static_cast<int32_t>(t.height / p_.align());
    img.embd.grid_w = static_cast<int32_t>(t.width / p_.align());
    img.embd.n_tokens = static_cast<int64_t>(img.embd.grid_h) * img.embd.grid_w;
    out.pieces.push_back(std::move(img));
    out.pieces.push_back(MediaPiece::text_piece("<|vision_end|>"));
    return out;
  }

  Result<MediaEmbedding> encode_video(const std::vector<Image>&, ThreadPool&, const VisionProgress&) const override {
    return unsupported("qwen3vl_merger: video input is not supported (Qwen3-VL's per-frame timestamps and "
                       "temporal positions are not implemented); pass frames as images");
  }

 private:
  Qwen3VlProjector p_;
};

Result<std::unique_ptr<VisionModel>> make_qwen3vl(const GgufFile& g) {
  VLKV_ASSIGN_OR_RETURN(Qwen3VlProjector p, Qwen3VlProjector::load(g));
  return std::unique_ptr<VisionModel>(new Qwen3VlVisionModel(std::move(p)));
}

VLKV_REGISTER_VISION_MODEL("qwen3vl_merger", make_qwen3vl);

}  // namespace
}  // namespace vlkv
