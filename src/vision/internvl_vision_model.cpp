// The internvl projector behind the VisionModel interface (registered as "internvl"):
// libmtmd's layout <img> [tile 1] ... [tile n] [overview] </img>, one embedding run per
// tile (libmtmd makes each its own chunk), the framing strings tokenized as text.
#include <memory>

#include "vision/internvl_model.h"
#include "vision/vision_model.h"

namespace vlkv {
namespace {

class InternvlVisionModel final : public VisionModel {
 public:
  explicit InternvlVisionModel(InternvlProjector p) : p_(std::move(p)) {}

  std::string_view projector_type() const override { return "internvl"; }
  int64_t n_embd_out() const override { return p_.n_embd_out(); }

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    VLKV_ASSIGN_OR_RETURN(InternvlTiles tiles, p_.preprocess(image));
    return std::move(tiles.tensors);
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    VLKV_ASSIGN_OR_RETURN(InternvlTiles tiles, p_.preprocess(image));
    const int32_t side = static_cast<int32_t>(p_.tokens_side());
    MediaEmbedding out;
    out.pieces.push_back(MediaPiece::text_piece("<img>"));
    for (const ImageTensor& tile : tiles.tensors) {
      MediaPiece piece;
      piece.kind = MediaPiece::Kind::kEmbeddings;
      VLKV_RETURN_IF_ERROR(p_.encode_tile(tile, piece.embd.data, pool));
      piece.embd.n_tokens = p_.tokens_per_tile();
      piece.embd.grid_h = side;
      piece.embd.grid_w = side;
      out.pieces.push_back(std::move(piece));
    }
    out.pieces.push_back(MediaPiece::text_piece("</img>"));
    return out;
  }

 private:
  InternvlProjector p_;
};

VLKV_REGISTER_VISION_MODEL("internvl", [](const GgufFile& g) -> Result<std::unique_ptr<VisionModel>> {
  VLKV_ASSIGN_OR_RETURN(InternvlProjector p, InternvlProjector::load(g));
  return std::unique_ptr<VisionModel>(new InternvlVisionModel(std::move(p)));
});

}  // namespace
}  // namespace vlkv
