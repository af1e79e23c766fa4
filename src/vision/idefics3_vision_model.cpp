// The idefics3 projector behind the VisionModel interface (registered as "idefics3").
#include <memory>

#include "vision/idefics3_model.h"
#include "vision/vision_model.h"

namespace vlkv {
namespace {

class Idefics3VisionModel final : public VisionModel {
 public:
  explicit Idefics3VisionModel(Idefics3Projector p) : p_(std::move(p)) {}

  std::string_view projector_type() const override { return "idefics3"; }
  int64_t n_embd_out() const override { return p_.n_embd_out(); }

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    const VitHparams& hp = p_.hparams();
    VLKV_ASSIGN_OR_RETURN(Idefics3Tiles tiles,
                          idefics3_preprocess(image, hp.image_size, p_.longest_edge(), hp.image_mean, hp.image_std));
    return std::move(tiles.tensors);
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    const VitHparams& hp = p_.hparams();
    VLKV_ASSIGN_OR_RETURN(Idefics3Tiles tiles,
                          idefics3_preprocess(image, hp.image_size, p_.longest_edge(), hp.image_mean, hp.image_std));
    const int32_t side = static_cast<int32_t>((hp.image_size / hp.patch_size + p_.scale_factor() - 1) /
                                              p_.scale_factor());
    MediaEmbedding out;
    for (const Idefics3LayoutItem& item : idefics3_token_layout(tiles.grid_rows, tiles.grid_cols)) {
      MediaPiece piece;
      if (item.tile < 0 && item.tokenized) {
        piece.kind = MediaPiece::Kind::kText;
        for (const std::string& t : item.tokens) piece.text += t;
      } else if (item.tile < 0) {
        piece.kind = MediaPiece::Kind::kVocabTokens;
        piece.vocab_tokens = item.tokens;
      } else {
        piece.kind = MediaPiece::Kind::kEmbeddings;
        VLKV_RETURN_IF_ERROR(p_.encode_tile(tiles.tensors[static_cast<size_t>(item.tile)], nullptr,
                                            piece.embd.data, pool));
        piece.embd.n_tokens = p_.tokens_per_tile();
        piece.embd.grid_t = 1;
        piece.embd.grid_h = side;
        piece.embd.grid_w = side;
      }
      out.pieces.push_back(std::move(piece));
    }
    return out;
  }

 private:
  Idefics3Projector p_;
};

VLKV_REGISTER_VISION_MODEL("idefics3", [](const GgufFile& g) -> Result<std::unique_ptr<VisionModel>> {
  VLKV_ASSIGN_OR_RETURN(Idefics3Projector p, Idefics3Projector::load(g));
  return std::unique_ptr<VisionModel>(new Idefics3VisionModel(std::move(p)));
});

}  // namespace
}  // namespace vlkv
