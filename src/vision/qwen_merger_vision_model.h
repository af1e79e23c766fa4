// The VisionModel part Qwen2-VL and Qwen3-VL share: one tensor per image, laid out as
// <|vision_start|> [grid_t * grid_h * grid_w merged tokens] <|vision_end|> (libmtmd's framing),
// a still image encoded as one temporal patch (the same frame through both conv kernels).
#pragma once

#include <string>
#include <vector>

#include "vision/projector_vision_model.h"
#include "vision/qwen2vl_model.h"

namespace vlkv {

template <class Projector>
class QwenMergerVisionModel : public ProjectorVisionModel<Projector> {
 public:
  using ProjectorVisionModel<Projector>::ProjectorVisionModel;

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    return one_image_tensor(this->p_.preprocess(image));
  }

  Result<MediaEmbedding> layout_image(int32_t width, int32_t height) const override {
    return layout_groups(1, width, height);
  }

  Status set_image_tokens(int64_t min_tokens, int64_t max_tokens) override {
    ImageTokenBounds b;
    if (min_tokens > 0) b.min = min_tokens;
    if (max_tokens > 0) b.max = max_tokens;
    if (std::string why = b.check(); !why.empty()) return invalid_argument(why);
    this->p_.set_token_bounds(b);
    return Status::ok();
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    if (!image.valid()) return invalid_argument(std::string(Projector::kName) + ": empty or malformed image");
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding out, layout_image(image.width, image.height));
    VLKV_ASSIGN_OR_RETURN(ImageTensor t, this->p_.preprocess(image));
    VLKV_RETURN_IF_ERROR(this->p_.encode(t, t, out.pieces[1].embd.data, pool));
    return out;
  }

 protected:
  // grid_t temporal patches of the fitted size's merged grid, in one run.
  Result<MediaEmbedding> layout_groups(int64_t grid_t, int32_t width, int32_t height) const {
    VLKV_ASSIGN_OR_RETURN(const Qwen2VlSize size, this->p_.fitted_size(width, height));
    const int32_t grid_h = static_cast<int32_t>(size.height / this->p_.align());
    const int32_t grid_w = static_cast<int32_t>(size.width / this->p_.align());
    MediaEmbedding out =
        framed_embedding_layout("<|vision_start|>", 1, grid_t * grid_h * grid_w, grid_h, grid_w, "<|vision_end|>");
    out.pieces[1].embd.grid_t = static_cast<int32_t>(grid_t);
    return out;
  }
};

}  // namespace vlkv
