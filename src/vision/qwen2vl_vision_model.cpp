// The Qwen2-VL merger behind the VisionModel interface (registered as "qwen2vl_merger",
// and as "qwen2.5vl_merger" for Qwen2.5-VL: RMSNorm, gated MLP, window attention).
// Video follows the Qwen2-VL reference (HF Qwen2VLImageProcessor + get_rope_index;
// ViT attention within each temporal patch as HF's cu_seqlens): frames resized to the first frame's size, paired into
// temporal patches (frame 2t through kernel 0, frame 2t+1 through kernel 1, an odd
// last frame duplicated), so N frames give grid_t = ceil(N/2) groups of
// grid_h * grid_w merged tokens in one run whose M-RoPE temporal index is 0..grid_t-1
// (Qwen2-VL) or follows time (Qwen2.5-VL, video_t_step below).
//
// llama.cpp (3f545be, tools/mtmd) does neither: mtmd-helper decodes a video with the ffmpeg
// CLI (4 fps by default), hands each frame over as a "mergeable" bitmap, and mtmd_tokenize
// pairs adjacent mergeable frames into one image chunk (both conv kernels, as here). Each
// pair is its own chunk: all its tokens get t = the chunk's start position and it advances
// the position by max(grid_w, grid_h), like a still image; a "[XmY.YYs]" timestamp text is
// inserted every 5 s (which also stops a pair from merging across it). So its temporal
// positions step by max(grid_w, grid_h) per frame pair, independent of the frame rate,
// and the ViT never sees a frame from the next pair.
#include <algorithm>
#include <memory>

#include "vision/qwen_merger_vision_model.h"

namespace vlkv {
namespace {

constexpr double kTemporalPatch = 2;          // frames per temporal patch (the two conv kernels)
constexpr double kQwen25TokensPerSecond = 2;  // Qwen2_5_VLVisionConfig.tokens_per_second

class Qwen2VlVisionModel final : public QwenMergerVisionModel<Qwen2VlProjector> {
 public:
  using QwenMergerVisionModel::QwenMergerVisionModel;

  bool video_frames_independent() const override { return false; }  // frames paired into temporal patches
  // N frames: ceil(N / 2) temporal patches of the first frame's grid, in one run.
  Result<MediaEmbedding> layout_video(int64_t n_frames, int32_t width, int32_t height) const override {
    if (n_frames <= 0) return invalid_argument("a video with no frames");
    return layout_groups((n_frames + 1) / 2, width, height);
  }

  // <|vision_start|> [grid_t * grid_h * grid_w merged tokens, (t, y, x) row-major] <|vision_end|>.
  // Qwen2.5-VL trains its temporal positions on time (transformers,
  // src/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py, Qwen2_5_VLModel.get_rope_index):
  // temporal patch ti sits at ti * second_per_grid_t * tokens_per_second, with
  // second_per_grid_t = temporal_patch_size / fps (processing_qwen2_5_vl.py; 1.0 when the
  // frame rate is unknown, get_rope_index's default). tokens_per_second is the vision
  // config's (2 in every released Qwen2.5-VL); llama.cpp's converter writes no key for it,
  // so the Qwen2.5-VL value is used. Qwen2-VL: one position per temporal patch.
  double video_t_step(double fps) const override {
    if (!p_.is_qwen25()) return 1.0;
    const double second_per_grid_t = fps > 0 ? kTemporalPatch / fps : 1.0;
    return second_per_grid_t * kQwen25TokensPerSecond;
  }

  Result<MediaEmbedding> encode_video(const std::vector<Image>& frames, ThreadPool& pool,
                                      const VisionProgress& progress) const override {
    if (frames.empty()) return invalid_argument("a video with no frames");
    if (!frames[0].valid()) return invalid_argument("qwen2vl: frame 0 is empty or malformed");
    const Qwen2VlSize size = p_.target_size(frames[0]);
    const int64_t n_frames = static_cast<int64_t>(frames.size());
    VLKV_ASSIGN_OR_RETURN(MediaEmbedding out, layout_video(n_frames, frames[0].width, frames[0].height));
    MediaPiece& run = out.pieces[1];
    const int64_t grid_t = run.embd.grid_t;
    run.embd.data.reserve(static_cast<size_t>(run.embd.n_tokens * p_.n_embd_out()));
    std::vector<float> group;  // [grid_h * grid_w, n_embd_out] one temporal patch
    for (int64_t ti = 0; ti < grid_t; ++ti) {
      const int64_t f0 = 2 * ti, f1 = std::min(2 * ti + 1, n_frames - 1);
      Result<ImageTensor> t0 = p_.preprocess(frames[static_cast<size_t>(f0)], size);
      if (!t0.is_ok()) return t0.status().with_context("frame " + std::to_string(f0));
      if (f1 == f0) {
        VLKV_RETURN_IF_ERROR(p_.encode(*t0, *t0, group, pool));  // odd last frame duplicated
      } else {
        Result<ImageTensor> t1 = p_.preprocess(frames[static_cast<size_t>(f1)], size);
        if (!t1.is_ok()) return t1.status().with_context("frame " + std::to_string(f1));
        VLKV_RETURN_IF_ERROR(p_.encode(*t0, *t1, group, pool));
      }
      run.embd.data.insert(run.embd.data.end(), group.begin(), group.end());
      if (progress) progress(f1 + 1, n_frames);
    }
    return out;
  }
};

VLKV_REGISTER_VISION_MODEL("qwen2vl_merger", (load_projector_model<Qwen2VlVisionModel, Qwen2VlProjector>));
VLKV_REGISTER_VISION_MODEL("qwen2.5vl_merger", (load_projector_model<Qwen2VlVisionModel, Qwen2VlProjector>));

}  // namespace
}  // namespace vlkv
