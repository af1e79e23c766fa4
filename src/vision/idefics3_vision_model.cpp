// The idefics3 projector behind the VisionModel interface (registered as "idefics3").
#include <memory>

#include "vision/idefics3_model.h"
#include "vision/projector_vision_model.h"

namespace vlkv {
namespace {

class Idefics3VisionModel final : public ProjectorVisionModel<Idefics3Projector> {
 public:
  using ProjectorVisionModel::ProjectorVisionModel;

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    const VitHparams& hp = p_.hparams();
    VLKV_ASSIGN_OR_RETURN(Idefics3Tiles tiles,
                          idefics3_preprocess(image, hp.image_size, p_.longest_edge(), hp.image_mean, hp.image_std));
    return std::move(tiles.tensors);
  }

  // idefics3_token_layout over the grid: tile headers, row breaks, the global image last.
  Result<MediaEmbedding> layout_image(int32_t width, int32_t height) const override {
    const VitHparams& hp = p_.hparams();
    VLKV_ASSIGN_OR_RETURN(Idefics3Tiles grid, idefics3_grid(width, height, hp.image_size, p_.longest_edge()));
    const int32_t side = static_cast<int32_t>((hp.image_size / hp.patch_size + p_.scale_factor() - 1) /
                                              p_.scale_factor());
    MediaEmbedding out;
    for (const Idefics3LayoutItem& item : idefics3_token_layout(grid.grid_rows, grid.grid_cols)) {
      MediaPiece piece;
      if (item.tile < 0 && item.tokenized) {
        piece.kind = MediaPiece::Kind::kText;
        for (const std::string& t : item.tokens) piece.text += t;
      } else if (item.tile < 0) {
        piece.kind = MediaPiece::Kind::kVocabTokens;
        piece.vocab_tokens = item.tokens;
      } else {
        piece = embedding_layout_piece(p_.tokens_per_tile(), side, side);
      }
      out.pieces.push_back(std::move(piece));
    }
    return out;
  }

  // The layout's runs in order are the tiles in order (idefics3_token_layout numbers them so).
  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding out, layout_image(image.width, image.height));
    const VitHparams& hp = p_.hparams();
    VLKV_ASSIGN_OR_RETURN(Idefics3Tiles tiles,
                          idefics3_preprocess(image, hp.image_size, p_.longest_edge(), hp.image_mean, hp.image_std));
    size_t tile = 0;
    for (MediaPiece& piece : out.pieces) {
      if (piece.kind != MediaPiece::Kind::kEmbeddings) continue;
      if (tile >= tiles.tensors.size()) return Status(StatusCode::kInternal, "idefics3: tiles disagree with the layout");
      VLKV_RETURN_IF_ERROR(p_.encode_tile(tiles.tensors[tile++], nullptr, piece.embd.data, pool));
    }
    if (tile != tiles.tensors.size()) return Status(StatusCode::kInternal, "idefics3: tiles disagree with the layout");
    return out;
  }
};

VLKV_REGISTER_VISION_MODEL("idefics3", (load_projector_model<Idefics3VisionModel, Idefics3Projector>));

}  // namespace
}  // namespace vlkv
