#include "vision/vision_model.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace vlkv {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, VisionModelFactory, std::less<>> factories;
};

Registry& registry() {
  static Registry r;  // constructed on first use: safe from other static initializers
  return r;
}

}  // namespace

int64_t MediaEmbedding::n_visual_tokens() const {
  int64_t n = 0;
  for (const MediaPiece& p : pieces) {
    if (p.kind == MediaPiece::Kind::kEmbeddings) n += p.embd.n_tokens;
  }
  return n;
}

bool register_vision_model(std::string name, VisionModelFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.factories.emplace(std::move(name), std::move(factory)).second;
}

std::vector<std::string> registered_vision_models() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

Result<std::unique_ptr<VisionModel>> VisionModel::load(const GgufFile& mmproj) {
  Result<std::string> arch = mmproj.get_string("general.architecture");
  if (!arch.is_ok() || *arch != "clip") {
    return invalid_file(mmproj.path() + ": not a multimodal projector (general.architecture is '" +
                        (arch.is_ok() ? *arch : std::string("missing")) + "', expected 'clip')");
  }
  Result<bool> has_vision = mmproj.get_bool("clip.has_vision_encoder");
  if (has_vision.is_ok() && !*has_vision) {
    return unsupported(mmproj.path() + ": this mmproj has no vision encoder (clip.has_vision_encoder = false)");
  }
  Result<std::string> type = mmproj.get_string("clip.projector_type");
  if (!type.is_ok()) {
    // Old LLaVA-1.5 files predate the key; llama.cpp treats them as "mlp".
    if (type.status().code() != StatusCode::kNotFound) return type.status().with_context(mmproj.path());
    type = std::string("mlp");
  }
  VisionModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(*type);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const std::string& n : registered_vision_models()) known += (known.empty() ? "" : ", ") + n;
    return unsupported(mmproj.path() + ": projector type '" + *type + "' is not supported (supported: " + known + ")");
  }
  Result<std::unique_ptr<VisionModel>> model = factory(mmproj);
  if (!model.is_ok()) return model.status().with_context(mmproj.path());
  return model;
}

MediaPiece embedding_layout_piece(int64_t n_tokens, int32_t grid_h, int32_t grid_w) {
  MediaPiece p;
  p.kind = MediaPiece::Kind::kEmbeddings;
  p.embd.n_tokens = n_tokens;
  p.embd.grid_h = grid_h;
  p.embd.grid_w = grid_w;
  return p;
}

MediaEmbedding framed_embedding_layout(std::string open, int64_t n_runs, int64_t n_tokens, int32_t grid_h,
                                       int32_t grid_w, std::string close) {
  MediaEmbedding out;
  out.pieces.push_back(MediaPiece::text_piece(std::move(open)));
  for (int64_t i = 0; i < n_runs; ++i) out.pieces.push_back(embedding_layout_piece(n_tokens, grid_h, grid_w));
  out.pieces.push_back(MediaPiece::text_piece(std::move(close)));
  return out;
}

Status VisionModel::set_image_tokens(int64_t min_tokens, int64_t max_tokens) {
  if (min_tokens == 0 && max_tokens == 0) return Status::ok();
  return unsupported("--image-min-tokens / --image-max-tokens: this mmproj's projector (" +
                     std::string(projector_type()) +
                     ") lays every image out at a fixed size; they apply to the Qwen-VL family's (qwen2vl_merger, "
                     "qwen2.5vl_merger, qwen3vl_merger), which resize to a token budget. Use --max-image-pixels "
                     "for a size limit, --frames / --fps for fewer video frames");
}

Result<MediaEmbedding> VisionModel::layout_video(int64_t n_frames, int32_t width, int32_t height) const {
  if (n_frames <= 0) return invalid_argument("a video with no frames");
  VLKV_ASSIGN_OR_RETURN(MediaEmbedding frame, layout_image(width, height));
  MediaEmbedding out;
  out.pieces.reserve(frame.pieces.size() * static_cast<size_t>(n_frames));
  for (int64_t i = 0; i < n_frames; ++i) out.pieces.insert(out.pieces.end(), frame.pieces.begin(), frame.pieces.end());
  return out;
}

Result<MediaEmbedding> VisionModel::encode_video(const std::vector<Image>& frames, ThreadPool& pool,
                                                 const VisionProgress& progress) const {
  if (frames.empty()) return invalid_argument("a video with no frames");
  MediaEmbedding out;
  const int64_t total = static_cast<int64_t>(frames.size());
  for (int64_t i = 0; i < total; ++i) {
    Result<MediaEmbedding> one = encode_image(frames[static_cast<size_t>(i)], pool);
    if (!one.is_ok()) return one.status().with_context("frame " + std::to_string(i));
    for (MediaPiece& p : one->pieces) out.pieces.push_back(std::move(p));
    if (progress) progress(i + 1, total);
  }
  return out;
}

}  // namespace vlkv
