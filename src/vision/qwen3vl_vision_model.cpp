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

  Result<MediaEmbedding> layout_image(int32_t width, int32_t height) const override {
    VLKV_ASSIGN_OR_RETURN(const Qwen2VlSize size, p_.fitted_size(width, height));
    const int32_t grid_h = static_cast<int32_t>(size.height / p_.align());
    const int32_t grid_w = static_cast<int32_t>(size.width / p_.align());
    MediaEmbedding out;
    out.pieces.push_back(MediaPiece::text_piece("<|vision_start|>"));
    out.pieces.push_back(embedding_layout_piece(static_cast<int64_t>(grid_h) * grid_w, grid_h, grid_w));
    out.pieces.push_back(MediaPiece::text_piece("<|vision_end|>"));
    return out;
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    if (!image.valid()) return invalid_argument("qwen3vl: empty or malformed image");
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding out, layout_image(image.width, image.height));
    VLKV_ASSIGN_OR_RETURN(ImageTensor t, p_.preprocess(image));
    VLKV_RETURN_IF_ERROR(p_.encode(t, t, out.pieces[1].embd.data, pool));
    return out;
  }

  Result<MediaEmbedding> layout_video(int64_t, int32_t, int32_t) const override { return video_refused(); }
  Result<MediaEmbedding> encode_video(const std::vector<Image>&, ThreadPool&, const VisionProgress&) const override {
    return video_refused();
  }

 private:
  static Status video_refused() {
    return unsupported("qwen3vl_merger: video input is not supported (Qwen3-VL's per-frame timestamps and "
                       "temporal positions are not implemented); pass frames as images");
  }
  Qwen3VlProjector p_;
};

Result<std::unique_ptr<VisionModel>> make_qwen3vl(const GgufFile& g) {
  VLKV_ASSIGN_OR_RETURN(Qwen3VlProjector p, Qwen3VlProjector::load(g));
  return std::unique_ptr<VisionModel>(new Qwen3VlVisionModel(std::move(p)));
}

VLKV_REGISTER_VISION_MODEL("qwen3vl_merger", make_qwen3vl);

}  // namespace
}  // namespace vlkv
