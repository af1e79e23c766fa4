#include "vision/gemma3_model.h"

#include <cstring>
#include <memory>
#include <string>

#include "gguf/gguf_optional.h"
#include "kernels/ops.h"
#include "vision/projector_vision_model.h"
#include "vision/vit_common_image.h"

namespace vlkv {

Result<Gemma3Projector> Gemma3Projector::load(const GgufFile& g) {
  Gemma3Projector p;
  VLKV_ASSIGN_OR_RETURN(VitHparams hp, read_vit_hparams(g));
  if (hp.projector_type != "gemma3") return invalid_file("mmproj: projector type is not gemma3");
  if (!hp.feature_layers.empty())  // clip_graph_siglip runs every layer; a feature layer would be ignored there too
    return unsupported("mmproj: 'clip.vision.feature_layer' with the gemma3 projector is not supported");
  VLKV_ASSIGN_OR_RETURN(p.merge_, gguf_i64_or(g, "clip.vision.projector.scale_factor", p.merge_));
  if (p.merge_ < 1 || p.merge_ > 64) return invalid_file("mmproj: projector.scale_factor out of range");
  VLKV_ASSIGN_OR_RETURN(p.encoder_, SiglipEncoder::load(g, hp));
  if (p.encoder_.n_patches_side() % p.merge_ != 0)
    return unsupported("mmproj: a patch grid of " + std::to_string(p.encoder_.n_patches_side()) +
                       " per side is not a multiple of projector.scale_factor " + std::to_string(p.merge_));
  VLKV_ASSIGN_OR_RETURN(p.soft_emb_norm_, bind_vit_vector(g, "mm.soft_emb_norm.weight", hp.n_embd));

  // mm.input_projection.weight: ggml dims {n_text, n_vision} (HF's [vision, text] layout);
  // llama.cpp multiplies by its transpose, so keep a transposed copy [n_text rows, n_vision cols].
  const GgufTensorInfo* w = g.find_tensor("mm.input_projection.weight");
  if (!w || w->dims.size() != 2 || w->dims[1] != hp.n_embd || w->dims[0] <= 0 || w->dims[0] > (1 << 20))
    return invalid_file("mmproj: missing or malformed 'mm.input_projection.weight' (expected {n_embd_text, " +
                        std::to_string(hp.n_embd) + "})");
  size_t elem = 0;
  if (w->type == GgmlType::kF32) elem = 4;
  if (w->type == GgmlType::kF16 || w->type == GgmlType::kBF16) elem = 2;
  if (elem == 0) return unsupported("mmproj: 'mm.input_projection.weight' must be f32, f16 or bf16 (llama.cpp transposes it)");
  const int64_t n_text = w->dims[0], n_vis = w->dims[1];
  if (w->n_bytes != static_cast<uint64_t>(n_text * n_vis) * elem)
    return invalid_file("mmproj: 'mm.input_projection.weight' byte size does not match its shape");
  auto t = std::make_shared<std::vector<uint8_t>>(w->n_bytes);
  for (int64_t i = 0; i < n_vis; ++i)
    for (int64_t o = 0; o < n_text; ++o)
      std::memcpy(&(*t)[(o * n_vis + i) * elem], w->data + (i * n_text + o) * elem, elem);
  p.proj_ = WeightMatrix{w->type, t->data(), n_text, n_vis, static_cast<size_t>(n_vis) * elem};
  p.proj_data_ = std::move(t);
  return p;
}

Result<ImageTensor> Gemma3Projector::preprocess(const Image& image) const {
  if (!image.valid()) return invalid_argument("gemma3: empty or malformed image");
  const VitHparams& hp = hparams();
  const int32_t s = static_cast<int32_t>(hp.image_size);
  // libmtmd's fixed-size preprocessor with gemma3's RESIZE_ALGO_BILINEAR and padding.
  return normalize_image(resize_image_padded(image, s, s, ResizeAlgo::kBilinear, {0, 0, 0}), hp.image_mean,
                         hp.image_std);
}

Status Gemma3Projector::encode(const ImageTensor& img, std::vector<float>& embd, ThreadPool& pool) const {
  const VitHparams& hp = hparams();
  const int64_t d = hp.n_embd, side = encoder_.n_patches_side(), k = merge_, ts = tokens_side();
  std::vector<float> feats;  // [side * side, n_embd] row-major patches
  VLKV_RETURN_IF_ERROR(encoder_.encode(img, feats, pool));
  // Average pool k x k, stride k (ggml_pool_2d AVG, no padding): tokens row-major.
  std::vector<float> pooled(static_cast<size_t>(ts * ts * d), 0.0f);  // [n_tokens, n_embd]
  const float inv = 1.0f / static_cast<float>(k * k);
  for (int64_t ty = 0; ty < ts; ++ty)
    for (int64_t tx = 0; tx < ts; ++tx) {
      float* out = &pooled[(ty * ts + tx) * d];
      for (int64_t dy = 0; dy < k; ++dy)
        for (int64_t dx = 0; dx < k; ++dx) add_inplace(out, &feats[((ty * k + dy) * side + tx * k + dx) * d], d);
      for (int64_t c = 0; c < d; ++c) out[c] *= inv;
    }
  for (int64_t t = 0; t < ts * ts; ++t) rms_norm(&pooled[t * d], soft_emb_norm_.data(), d, hp.eps, &pooled[t * d]);
  embd.resize(static_cast<size_t>(ts * ts * proj_.n_rows));
  matmul(proj_, pooled.data(), ts * ts, embd.data(), pool);
  return Status::ok();
}

namespace {

class Gemma3VisionModel final : public ProjectorVisionModel<Gemma3Projector> {
 public:
  using ProjectorVisionModel::ProjectorVisionModel;

  Result<std::vector<ImageTensor>> preprocess(const Image& image) const override {
    return one_image_tensor(p_.preprocess(image));
  }

  // <start_of_image> [n_tokens] <end_of_image>, as libmtmd frames it (img_beg / img_end):
  // every image is fitted to the one tile, so the count does not depend on its size.
  Result<MediaEmbedding> layout_image(int32_t width, int32_t height) const override {
    if (width <= 0 || height <= 0) return invalid_argument("gemma3: empty or malformed image");
    const int32_t side = static_cast<int32_t>(p_.tokens_side());
    return framed_embedding_layout("<start_of_image>", 1, p_.n_tokens(), side, side, "<end_of_image>");
  }

  Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const override {
    if (!image.valid()) return invalid_argument("gemma3: empty or malformed image");
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding out, layout_image(image.width, image.height));
    VLKV_ASSIGN_OR_RETURN(ImageTensor t, p_.preprocess(image));
    VLKV_RETURN_IF_ERROR(p_.encode(t, out.pieces[1].embd.data, pool));
    return out;
  }
};

VLKV_REGISTER_VISION_MODEL("gemma3", (load_projector_model<Gemma3VisionModel, Gemma3Projector>));

}  // namespace
}  // namespace vlkv
