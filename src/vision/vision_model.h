// The vision side of a VLM: one interface for every encoder + projector pair
// (CLIP/mlp for LLaVA, SigLIP/idefics3 for SmolVLM, Qwen2-VL ViT/merger), chosen
// by the mmproj's clip.projector_type. Implementations register themselves by
// name (VLKV_REGISTER_VISION_MODEL in their .cpp); the engine never names them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vlkv/status.h"

namespace vlkv {

// A run of visual tokens: projector output for one image, tile or frame group.
struct EmbeddingRun {
  int64_t n_tokens = 0;
  std::vector<float> data;  // [n_tokens, n_embd] projector output, row-major
  // The tokens' layout on the image grid, row-major [grid_t, grid_h, grid_w]
  // (grid_t * grid_h * grid_w == n_tokens), after any merge/pixel shuffle.
  // Qwen2-VL's M-RoPE positions come from it; llama-style decoders ignore it.
  int32_t grid_t = 1;
  int32_t grid_h = 0;
  int32_t grid_w = 0;
  // M-RoPE temporal positions per temporal patch (qwen2vl_positions.h): 1 for images;
  // a video's comes from VisionModel::video_t_step.
  double t_step = 1.0;
};

// One piece of the token sequence that replaces a media marker, as libmtmd builds it:
// - kText: text the engine tokenizes as its own segment (add_special = false,
//   parse_special = true: libmtmd's add_text(str, true); e.g. "<|vision_start|>",
//   "<fake_token_around_image><row_1_col_1>");
// - kVocabTokens: strings each of which is one vocabulary token, found by its piece
//   and never tokenized (libmtmd's lookup_token; e.g. "\n", "\n\n", "<global-img>").
//   Tokenizing "\n" instead would give SPM's space prefix "▁" an extra position;
// - kEmbeddings: a run of embeddings (TokenKind::kVisual in the cache).
struct MediaPiece {
  enum class Kind { kText, kEmbeddings, kVocabTokens };
  Kind kind = Kind::kText;
  std::string text;                        // kText
  EmbeddingRun embd;                       // kEmbeddings
  std::vector<std::string> vocab_tokens;   // kVocabTokens, in order

  static MediaPiece text_piece(std::string text) {
    MediaPiece p;
    p.text = std::move(text);
    return p;
  }
};

// The whole replacement of one media marker, in sequence order.
struct MediaEmbedding {
  std::vector<MediaPiece> pieces;
  int64_t n_visual_tokens() const;
};

// Called while encoding many frames: done of total units (frames or tiles).
using VisionProgress = std::function<void(int64_t done, int64_t total)>;

class VisionModel {
 public:
  // Reads clip.projector_type and builds the registered implementation; the
  // GgufFile must outlive the model (weights are views into its mapping).
  // Unsupported for an unknown projector type, InvalidFile for bad shapes/keys.
  static Result<std::unique_ptr<VisionModel>> load(const GgufFile& mmproj);
  virtual ~VisionModel() = default;

  virtual std::string_view projector_type() const = 0;  // llama.cpp's name: "mlp", "idefics3", "qwen2vl_merger"
  virtual int64_t n_embd_out() const = 0;               // projector output size: must equal the text n_embd

  // The tensors the ViT receives for one image, in encode order (tiles then
  // global image for idefics3; one tensor for llava and qwen2vl).
  virtual Result<std::vector<ImageTensor>> preprocess(const Image& image) const = 0;

  // Image -> the token pieces that replace its marker (special text + embeddings).
  virtual Result<MediaEmbedding> encode_image(const Image& image, ThreadPool& pool) const = 0;

  // The pieces encode_image returns for a width x height image, each run with its n_tokens
  // and grid but no embeddings (EmbeddingRun::data empty), or the error encode_image gives
  // for that size: the token count from a file's header, before any pixel is decoded.
  // encode_image is built on it (the layout, then each run's embeddings), so they agree.
  virtual Result<MediaEmbedding> layout_image(int32_t width, int32_t height) const = 0;
  // The same for encode_video over n_frames frames of width x height (the first frame's
  // size). Default: n_frames times layout_image, as the default encode_video.
  virtual Result<MediaEmbedding> layout_video(int64_t n_frames, int32_t width, int32_t height) const;

  // Video frames -> pieces. Default: every frame encoded as an image, in order.
  // Qwen2-VL overrides it to pair frames into temporal patches.
  virtual Result<MediaEmbedding> encode_video(const std::vector<Image>& frames, ThreadPool& pool,
                                              const VisionProgress& progress) const;
  // Whether a video's pieces are its frames' encode_image pieces in turn (the defaults of
  // layout_video and encode_video): then a video can be encoded frame by frame as the
  // decoder reaches it (a streamed prompt), holding one frame at a time.
  virtual bool video_frames_independent() const { return true; }

  // How many tokens one image or frame may take (--image-min-tokens / --image-max-tokens):
  // for encoders that resize to a token budget (the Qwen-VL family); 0 keeps a bound as the
  // model has it. Unsupported elsewhere: their images take a fixed layout.
  virtual Status set_image_tokens(int64_t min_tokens, int64_t max_tokens);

  // M-RoPE temporal positions between consecutive temporal patches of a video whose
  // frames were sampled at fps frames per second (0: unknown). 1 (one position per
  // temporal patch, Qwen2-VL) unless the model ties positions to time (Qwen2.5-VL).
  virtual double video_t_step(double fps) const {
    (void)fps;
    return 1.0;
  }
};

// A run of `n_tokens` visual tokens laid out on a grid_h x grid_w grid (grid_t = 1), no data.
MediaPiece embedding_layout_piece(int64_t n_tokens, int32_t grid_h, int32_t grid_w);
// The layout of a model that wraps an image in two marker strings: `open`, n_runs runs of
// n_tokens visual tokens each (one per tile), `close`.
MediaEmbedding framed_embedding_layout(std::string open, int64_t n_runs, int64_t n_tokens, int32_t grid_h,
                                       int32_t grid_w, std::string close);

// Registry: projector type name -> factory. Self-registration from static
// initializers (the vision layer is linked whole-archive, like kv methods).
using VisionModelFactory = std::function<Result<std::unique_ptr<VisionModel>>(const GgufFile&)>;
bool register_vision_model(std::string name, VisionModelFactory factory);
std::vector<std::string> registered_vision_models();

#define VLKV_REGISTER_VISION_MODEL(name, factory) \
  static const bool VLKV_CONCAT_(vlkv_vision_registered_, __LINE__) = ::vlkv::register_vision_model(name, factory)

}  // namespace vlkv
