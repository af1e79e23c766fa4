// The Qwen3-VL merger behind the VisionModel interface (registered as "qwen3vl_merger").
// An image becomes <|vision_start|> [grid_h * grid_w merged tokens] <|vision_end|> as
// libmtmd frames it; each token's row carries the deepstack parts after its embedding.
// Video is refused: Qwen3-VL interleaves timestamp text between frames and gives each
// frame its own temporal position, which vlkv does not build yet.
#include <memory>

#include "vision/qwen3vl_model.h"
#include "vision/qwen_merger_vision_model.h"

namespace vlkv {
namespace {

class Qwen3VlVisionModel final : public QwenMergerVisionModel<Qwen3VlProjector> {
 public:
  using QwenMergerVisionModel::QwenMergerVisionModel;

  bool video_frames_independent() const override { return false; }  // videos refused
  Result<MediaEmbedding> layout_video(int64_t, int32_t, int32_t) const override { return video_refused(); }
  Result<MediaEmbedding> encode_video(const std::vector<Image>&, ThreadPool&, const VisionProgress&) const override {
    return video_refused();
  }

 private:
  static Status video_refused() {
    return unsupported("qwen3vl_merger: video input is not supported (Qwen3-VL's per-frame timestamps and "
                       "temporal positions are not implemented); pass frames as images");
  }
};

VLKV_REGISTER_VISION_MODEL("qwen3vl_merger", (load_projector_model<Qwen3VlVisionModel, Qwen3VlProjector>));

}  // namespace
}  // namespace vlkv
