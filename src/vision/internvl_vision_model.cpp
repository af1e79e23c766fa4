// The internvl projector behind the VisionModel interface (registered as "internvl"):
// libmtmd's layout <img> [tile 1] ... [tile n] [overview] </img>, one embedding run per
// tile (libmtmd makes each its own chunk), the framing strings tokenized as text.
#include <memory>

#include "vision/internvl_model.h"
#include "vision/projector_vision_model.h"

namespace vlkv {
namespace {

class InternvlVisionModel final : public ProjectorVisionModel<InternvlProjector> {
 public:
  using ProjectorVisionModel::ProjectorVisionModel;

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    VLKV_ASSIGN_OR_RETURN(InternvlTiles tiles, p_.preprocess(image));
    return std::move(tiles.tensors);
  }

  Result<MediaEmbedding> layout_image(int32_t width, int32_t height) const override {
    VLKV_ASSIGN_OR_RETURN(InternvlTiles grid, p_.grid(width, height));
    const int64_t n_tiles = static_cast<int64_t>(grid.grid_rows) * grid.grid_cols + 1;  // + the overview
    const int32_t side = static_cast<int32_t>(p_.tokens_side());
    return framed_embedding_layout("<img>", n_tiles, p_.tokens_per_tile(), side, side, "</img>");
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    if (!image.valid()) return invalid_argument("internvl: empty or malformed image");
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding out, layout_image(image.width, image.height));
    VLKV_ASSIGN_OR_RETURN(InternvlTiles tiles, p_.preprocess(image));
    if (tiles.tensors.size() + 2 != out.pieces.size())
      return Status(StatusCode::kInternal, "internvl: tiles disagree with the layout");
    for (size_t i = 0; i < tiles.tensors.size(); ++i)
      VLKV_RETURN_IF_ERROR(p_.encode_tile(tiles.tensors[i], out.pieces[i + 1].embd.data, pool));
    return out;
  }
};

VLKV_REGISTER_VISION_MODEL("internvl", (load_projector_model<InternvlVisionModel, InternvlProjector>));

}  // namespace
}  // namespace vlkv
