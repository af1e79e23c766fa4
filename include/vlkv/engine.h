// The public API: an Engine is a loaded model (weights, tokenizer, KV cache
// with its compression method); a Session is one conversation on it.
// Failures come back as Status; nothing here throws or exits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vlkv/ingest_checkpoint.h"
#include "vlkv/logits_processor.h"
#include "vlkv/media.h"
#include "vlkv/param_field.h"
#include "vlkv/sampler_params.h"
#include "vlkv/status.h"

namespace vlkv {

struct EngineParams {
  std::string model_path;
  std::string mmproj_path;                    // vision encoder + projector GGUF ("": text only)
  MediaLimits media_limits;                   // bounds on images and video the engine accepts
  // Tokens per image or frame for encoders that resize to a budget (the Qwen-VL family;
  // llama.cpp's --image-min-tokens / --image-max-tokens); 0: the model's (8 and 4096).
  int64_t image_min_tokens = 0, image_max_tokens = 0;
  std::string kv_method = "f16";             // KV method spec, e.g. "f32", "f16"
  uint64_t kv_budget_bytes = 2ull << 30;      // KV page pool budget
  uint32_t kv_page_bytes = 0;                 // KV page size (a multiple of 64); 0: the cache's default
  int n_threads = 0;                          // 0: all cores
  int64_t n_ctx = 0;                          // max tokens per session; 0: the model's training context
  int64_t n_batch = 512;                      // prompt tokens per forward pass
  // false: decode (and prefill of Q8_0 / Q4_0 weights) rounds activations to 8-bit blocks
  // and uses integer dot products, as llama.cpp does (faster); true: exact f32 math everywhere.
  bool exact_matmul = false;
  // Vision encoder outputs kept by content hash (LRU), so a media item sent again (every
  // turn of an OpenAI conversation) is not encoded again; 0: none.
  uint64_t media_cache_bytes = 256ull << 20;

  // The parameter table (DESIGN.md): calls v(field, ParamField) for every field, in order;
  // the default is the field's value in EngineParams{}. Drives the commands' flags
  // (tools/param_flags.h), GET /props and vlkv bench's columns; Engine::load checks the
  // ranges. --kv and --kv-budget take a method spec and a size ("2G"): tools/kv_flags.h
  // adds and parses those two.
  template <typename Self, typename Visitor>
  static void visit(Self& p, Visitor&& v) {
    v(p.model_path, ParamField{"-m,--model", "model", "Model GGUF file (required)"});
    v(p.mmproj_path, ParamField{"--mmproj", "mmproj", "Vision encoder + projector GGUF (llama.cpp's mmproj)"});
    v(p.media_limits.max_frames, ParamField{"--max-frames", "max_frames", "Most frames taken from one video (0: as many as the context holds)", 0, 1 << 22});
    v(p.media_limits.max_pixels, ParamField{"--max-image-pixels", "max_image_pixels", "Most pixels in one image or frame",
                                           1, static_cast<double>(int64_t{1} << 40)});
    v(p.image_min_tokens, ParamField{"--image-min-tokens", "image_min_tokens",
                                     "Fewest tokens per image or frame (Qwen-VL family: smaller images are enlarged; 0: "
                                     "the model's 8)", 0, 1 << 20});
    v(p.image_max_tokens, ParamField{"--image-max-tokens", "image_max_tokens",
                                     "Most tokens per image or frame (Qwen-VL family: larger images are shrunk, trading "
                                     "resolution for video length; 0: the model's 4096)", 0, 1 << 20});
    v(p.kv_method, ParamField{"--kv", "kv", "KV cache method and parameters, NAME[:key=value,...]"});
    v(p.kv_budget_bytes, ParamField{"--kv-budget", "kv_budget_bytes", "KV cache memory budget (e.g. 512M, 4G)"});
    v(p.kv_page_bytes, ParamField{"", "kv_page_bytes", "KV page size (a multiple of 64); 0: the cache's default"});
    v(p.n_threads, ParamField{"-t,--threads", "n_threads", "Threads per model instance (0: all cores)", 0, 1024});
    v(p.n_ctx, ParamField{"-c,--ctx-size", "n_ctx", "Context size of a sequence (0: the model's)", 0});
    v(p.n_batch, ParamField{"-b,--batch-size", "n_batch", "Prompt tokens per forward pass", 1, 1 << 20});
    v(p.exact_matmul, ParamField{"--exact-matmul", "exact_matmul",
                                "Exact f32 matmuls (default: decode, and prefill of the quantized block formats, round "
                                "activations to 8 bits, as llama.cpp)"});
    v(p.media_cache_bytes, ParamField{"", "media_cache_bytes", "Vision encoder outputs kept by content hash (bytes; 0: none)"});
  }
};


struct GenerateParams {
  int64_t max_tokens = 128;
  bool ignore_eos = false;
  SamplerParams sampling;
  std::shared_ptr<LogitsProcessor> logits_processor;  // null: none (logits_processor.h)
};

struct GenerateStats {
  int64_t n_prompt_tokens = 0;                // text and visual tokens together
  int64_t n_visual_tokens = 0;
  double encode_seconds = 0;                  // vision encoder + projector
  int64_t n_generated = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  bool stopped_at_eos = false;
  // The context filled up mid-answer: the answer ends there (finish reason "length"), not in an error.
  bool stopped_at_context = false;
  // The last generated token when max_tokens (or on_piece) ended the generation: returned but not yet
  // evaluated (its logits were not needed); -1 when none. A conversation evaluates it before
  // the next turn, as llama-mtmd-cli does with every non-end token.
  int32_t unevaluated_token = -1;
  std::vector<int32_t> tokens;  // the generated tokens in order (the end-of-generation token excluded)
  int64_t n_cached_tokens = 0;  // prompt tokens taken from a prefix cache (serve's batch backend) or a resumed
                                // checkpoint (Engine::resume_session), not evaluated
  int64_t n_frames_encoded = 0;  // streamed video frames decoded and encoded by this call (not the skipped ones)
};

struct ModelInfo {
  std::string architecture;
  std::string name;
  int64_t n_vocab = 0, n_embd = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_ff = 0;
  int64_t n_ctx_train = 0;
  uint64_t weight_bytes = 0;
  std::string tokenizer_model;
  std::string chat_template;  // detected family name, "none" if none
  uint64_t fingerprint = 0;   // FNV-1a of the tensor table (names, types, shapes): identifies the weights
};

// One layer's post-RoPE queries and keys of an evaluated chunk, as its attention used
// them (Session::set_attention_observer; vlkv calibrate).
struct AttentionTap {
  int layer = 0;
  int64_t n_tokens = 0;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 0;                 // softmax scale of q.k
  const float* q = nullptr;        // [n_tokens, n_heads, head_dim]
  const float* k = nullptr;        // [n_tokens, n_kv_heads, head_dim]
  const uint8_t* kinds = nullptr;  // [n_tokens] 0 text, 1 visual, 2 special
};

// libmtmd's media marker: each one in a prompt's text stands for the next media item.
inline constexpr const char* kMediaMarker = "<__media__>";

// Progress of long steps ("encode": media items or frames; "prefill": prompt tokens).
using ProgressCallback = std::function<void(const char* stage, int64_t done, int64_t total)>;

// One image (one frame) or one video (its sampled frames, in order).
struct MediaItem {
  MediaItem() = default;
  MediaItem(std::vector<Image> frames_in, bool is_video_in = false, double fps_in = 0)
      : frames(std::move(frames_in)), is_video(is_video_in), fps(fps_in) {}

  std::vector<Image> frames;
  bool is_video = false;
  double fps = 0;  // video: frames sampled per second of the clip (0: unknown; Qwen2.5-VL positions use it)
  // A streamed video (frames empty, is_video): its frames are decoded and encoded as the
  // decoder reaches them, one at a time, so memory does not grow with the clip's length.
  // Its tokens and KV are those of the same frames given in `frames`. Consumed by the one
  // Session::eval_prompt/generate that feeds it; not cached (the encoder and prefix caches
  // key media by their pixels, unknown before the end). Families whose video encoder takes
  // frames together (Qwen2-VL's temporal pairs) read the stream whole at prepare time.
  std::shared_ptr<VideoStream> stream;
};

// A prompt with media. A text without markers but with media gets the markers
// prepended (media first, then the text, as LLaVA-style prompts put them).
// Engine::user_prompt builds one from a user's message the way llama-mtmd-cli does.
struct Prompt {
  std::string text;
  std::vector<MediaItem> media;
  // Salts every cache key of this prompt (the encoder cache's and the prefix cache's, hence
  // the stores' too; vLLM's cache_salt): prompts with different salts never share an entry,
  // neither hitting nor replacing another's. vlkv serve puts the tenant (its API key's
  // name) and the request's own cache_salt here. "": unsalted.
  std::string cache_salt;
  // Byte ranges [first, second) of text a client typed (vlkv serve: each message's text):
  // tokenized as plain text, so a typed "</s>" or "<|im_end|>" is not the special token and a
  // typed kMediaMarker stands for no media item. Outside them special tokens are parsed (the
  // chat template's own markers). Sorted, not overlapping.
  std::vector<std::pair<size_t, size_t>> plain_spans;
};

// A user message for n_media images/videos: unchanged if it has a kMediaMarker (or
// n_media is 0), else one marker per item in front of it (llama-mtmd-cli's rule).
std::string with_media_markers(const std::string& message, size_t n_media);

// A prompt tokenized and with its media encoded, in sequence order: what a Session
// feeds the decoder. Text chunks are tokenized one by one as libmtmd does.
struct PromptChunk {
  enum class Kind { kText, kMedia };
  Kind kind = Kind::kText;
  std::vector<int32_t> tokens;    // kText: token ids
  std::vector<float> embeddings;  // kMedia: [n_tokens, n_embd_inp] projector output (n_embd_inp = n_embd
                                  // but for Qwen3-VL's deepstack: n_embd x (1 + n_deepstack_layers))
  int64_t n_tokens = 0;
  // kMedia: the tokens' grid [grid_t, grid_h, grid_w] (Qwen2-VL M-RoPE positions come from it).
  int32_t grid_t = 1, grid_h = 0, grid_w = 0;
  double t_step = 1.0;  // kMedia: M-RoPE temporal positions per temporal patch (Qwen2.5-VL video)
  int32_t media_index = -1;  // kMedia: the Prompt's media item it encodes
  uint64_t media_hash = 0;   // kMedia: that item's content hash (pixels, sizes, fps), recorded in KV files
  // kMedia: 128 bits of a SHA-256 over the item's pixels, its preprocessing parameters, the
  // mmproj's identity and the piece's index (src/engine/media_cache.h): what the prefix
  // cache keys media rows by, never their placeholder ids. {0, 0}: unknown (not cached).
  uint64_t content_hi = 0, content_lo = 0;
};

struct PreparedPrompt {
  std::vector<PromptChunk> chunks;
  // By media_index: the streamed videos (MediaItem::stream), whose media chunks have no
  // embeddings until Session::eval_prompt encodes them frame by frame; null elsewhere.
  std::vector<std::shared_ptr<VideoStream>> streams;
  double encode_seconds = 0;
  // The text ends with the chat template's assistant opening: a later turn of the same
  // conversation has a chunk boundary here (the prefix cache keeps an entry at the end).
  bool ends_at_turn = false;
  // 128 bits of a SHA-256 of Prompt::cache_salt ({0, 0}: unsalted): the prefix cache's row
  // keys are mixed with them (media rows are keyed by salted digests already).
  uint64_t salt_hi = 0, salt_lo = 0;
  int64_t n_tokens() const;
  int64_t n_visual_tokens() const;
};

// A prompt's size known before its media are decoded (Engine::count_prompt_tokens).
struct PromptTokenCount {
  int64_t n_tokens = 0;         // text, framing and visual tokens together
  int64_t n_visual_tokens = 0;  // of which visual (the projector's embeddings)
};

// One turn of a conversation for Engine::apply_chat_template (role "system", "user" or
// "assistant"); content may hold media markers, copied verbatim.
struct ChatTurn {
  std::string role;
  std::string content;
};

class Session;
class Sampler;
struct SessionHistory;
struct SessionFile;
struct LayerQk;
struct PromptLayout;
struct FeedSegment;
class StreamedMediaEncoder;
struct IngestCheckpointState;

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const EngineParams& params);
  ~Engine();

  const ModelInfo& info() const;
  const EngineParams& params() const;
  int n_threads() const;

  // Tokenizer access (see src/text/tokenizer.h for the exact semantics).
  std::vector<int32_t> tokenize(const std::string& text, bool add_special, bool parse_special) const;
  std::string token_to_piece(int32_t token) const;
  bool is_end_of_generation(int32_t token) const;
  // Wraps a user message in the model's chat template (unchanged if it has none).
  std::string apply_chat_template(const std::string& user_message) const;
  // A whole conversation, ending with the opening of the assistant's turn (the server's
  // chat requests; add_generation_prompt false: ending with the last turn's close); one user
  // turn gives exactly the text of the overload above.
  std::string apply_chat_template(const std::vector<ChatTurn>& conversation, bool add_generation_prompt = true) const;
  // The prompt of one user message with media, as `vlkv run` and llama-mtmd-cli build it:
  // with_media_markers first (so the media sit inside the user turn), then the chat
  // template when use_template. Feed it to prepare_prompt or Session::generate.
  Prompt user_prompt(const std::string& message, std::vector<MediaItem> media, bool use_template) const;

  // KV memory: bytes held now by all sessions, the budget, and the method's stored bits/element.
  uint64_t kv_bytes_in_use() const;
  double kv_bits_per_element() const;
  // The method's steady-state KV bytes per token (all layers, K and V; no page tails or windows).
  double kv_bytes_per_token() const;
  // What admission reserves for a sequence of n_tokens with a KV method ("": the engine's):
  // an upper bound of the page bytes it will hold, windows and page tails included.
  // InvalidArgument for a bad method spec.
  Result<uint64_t> kv_bytes_for_tokens(int64_t n_tokens, const std::string& kv_method = "") const;
  // Another KV method's figures on this model ("": the engine's), from the method itself:
  // stored bits per element, and the exact codec bytes of n_tokens (no page tails, no
  // sliding-window frees). InvalidArgument for a bad spec.
  Result<double> kv_bits_per_element(const std::string& kv_method) const;
  Result<double> kv_codec_bytes_for_tokens(int64_t n_tokens, const std::string& kv_method = "") const;

  // A session whose KV pages use kv_method ("": the engine's; else a spec such as "kivi:bits=2").
  Result<std::unique_ptr<Session>> new_session(const std::string& kv_method = "");
  // A session continuing from a KV file written by Session::save_kv (docs/kv_file.md): its
  // cache, tokens and position as saved. The file is checked whole first (size, checksums,
  // model and mmproj identity, KV method: kv_method, "" the engine's) and refused with one
  // line (InvalidFile, or OutOfMemory over the KV budget) before the cache is touched.
  Result<std::unique_ptr<Session>> load_session(const std::string& path, const std::string& kv_method = "");
  // A session continuing the ingest a checkpoint file holds (ingest_checkpoint.h): the cache of
  // the prompt rows fed before it was written; the session's next eval_prompt / generate must be
  // the same prompt (its tokens, layout and videos are checked then) and feeds only the rest.
  // Refused with one line naming the file: as load_session, and where the file is no checkpoint
  // or its inputs differ from `inputs` (naming the first that does).
  Result<std::unique_ptr<Session>> resume_session(const std::string& path, const std::string& kv_method,
                                                  const std::vector<IngestInput>& inputs);

  // One batched forward pass: session i (distinct sessions of this engine) takes one more
  // token, tokens[i], and logits[i] receives its [n_vocab] logits, as eval({tokens[i]})
  // would give alone (bit for bit): the weights are read once for all of them. A session
  // that fails (e.g. out of KV memory) is left as it was and gets its statuses[i] (when
  // statuses is given; else the first failure is returned after the others committed).
  Status decode_batch(const std::vector<Session*>& sessions, const std::vector<int32_t>& tokens,
                      std::vector<std::vector<float>>* logits, std::vector<Status>* statuses = nullptr);

  // True when an mmproj was loaded; its projector type ("mlp", "idefics3", ...) or "".
  bool has_vision() const;
  std::string projector_type() const;
  // Splits prompt.text at kMediaMarker, tokenizes each text piece on its own (BOS
  // before the first when add_bos; special tokens parsed) and encodes each media
  // item with the vision model (with the model's special tokens around it).
  // InvalidArgument for media on a text-only model or a marker/media count mismatch.
  Result<PreparedPrompt> prepare_prompt(const Prompt& prompt, bool add_bos,
                                        const ProgressCallback& progress = {}) const;
  // prepare_prompt without running the vision encoder: the same chunks, media ones with
  // their token counts, grids and content digests but no embeddings (unless the encoder
  // cache holds them). For the Scheduler (Request::encode), which encodes an item only when
  // its prefix cache or a store does not cover the item's rows. Not for Session::eval_prompt.
  Result<PreparedPrompt> prepare_prompt_unencoded(const Prompt& prompt, bool add_bos) const;
  // Media items the vision encoder has run on since load (encoder-cache hits not counted).
  int64_t media_encodes() const;
  // prepare_prompt's n_tokens() and n_visual_tokens() for a prompt whose media are known by
  // their headers only (probe_image, probe_video: sizes and frame counts, one per marker as
  // prepare_prompt pairs them): the same text tokenized, each item laid out by the vision
  // model (VisionModel::layout_image/layout_video) with no pixel decoded or encoded. Equal
  // to prepare_prompt's counts for media of those sizes; its errors for a bad marker count
  // or a size the model refuses.
  // plain_spans: as Prompt::plain_spans of text.
  Result<PromptTokenCount> count_prompt_tokens(const std::string& text, const std::vector<MediaInfo>& media,
                                               bool add_bos,
                                               const std::vector<std::pair<size_t, size_t>>& plain_spans = {}) const;
  // Refuses (InvalidArgument, naming the counts) a prompt of n_prompt_tokens that cannot run:
  // with n_reserve generated tokens after it, more than the context size, or a KV
  // reservation (kv_bytes_for_tokens, as the Scheduler's admission) above the KV budget.
  // `what` names the prompt's media in the message (e.g. "2 images: 1532 visual tokens").
  Status check_prompt_fits(int64_t n_prompt_tokens, int64_t n_reserve, const std::string& kv_method = "",
                           const std::string& what = "") const;

  // The engine's internals, for the library's own orchestration (Scheduler): Impl is defined
  // in src/engine/engine_impl.h and opaque to users of this header.
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Session {
 public:
  ~Session();  // frees the session's KV pages

  // Appends tokens (prompt or generated) to the conversation. logits receives
  // [n_tokens, n_vocab] when all_logits, else the last row only.
  Status eval(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits);

  // Tokenizes prompt, evaluates it and samples up to params.max_tokens tokens,
  // calling on_piece with each token's bytes as it is generated (return false to stop).
  Status generate(const std::string& prompt, const GenerateParams& params,
                  const std::function<bool(const std::string&)>& on_piece, GenerateStats* stats);

  // Appends a prepared prompt (text and media chunks); last_logits receives the
  // [n_vocab] logits after its last token. Visual tokens enter the cache as such.
  Status eval_prompt(const PreparedPrompt& prompt, std::vector<float>* last_logits,
                     const ProgressCallback& progress = {});

  // generate() for a prompt with media: prepares it (BOS on the session's first
  // turn), evaluates it and samples as the text version does.
  Status generate(const Prompt& prompt, const GenerateParams& params,
                  const std::function<bool(const std::string&)>& on_piece, GenerateStats* stats,
                  const ProgressCallback& progress = {});

  // Called for every layer of every chunk evaluated from now on (empty: none).
  void set_attention_observer(std::function<void(const AttentionTap&)> observer);

  // Checkpoints of the prefills of streamed videos from now on (ingest_checkpoint.h); an empty
  // path: none.
  void set_ingest_checkpointing(IngestCheckpointing checkpointing);
  // Rows of the prompt being resumed that this session holds (Engine::resume_session), which the
  // next eval_prompt counts as its own and does not feed again; 0 when none.
  int64_t n_resumed() const;

  // A new session holding a copy of this one's cache (its pages copied) and position:
  // a shared prefix evaluated once. OutOfMemory when the copy does not fit the budget.
  Result<std::unique_ptr<Session>> fork() const;

  // Writes the cache (codec bytes as stored), the tokens it holds with their kinds and
  // positions, media hashes and the model's identity to path (docs/kv_file.md). Unsupported
  // naming the KV method where its per-sequence state cannot be saved exactly.
  Status save_kv(const std::string& path) const;

  int64_t n_past() const;   // tokens in the cache
  int64_t n_vocab() const;
  // Exact bytes of the KV codec blocks this session holds now (page tails excluded): what
  // its tokens, with their kinds and its own layer grouping, cost under the active method.
  double kv_stored_bytes() const;
  // Bytes of the KV pages this session holds now (page tails included): the memory its cache
  // really takes, and the one "held" figure run, chat, the API and /metrics report.
  uint64_t kv_held_bytes() const;
  // What the KV method decided for this session (Q Cache: its lazy layers); "" if nothing.
  std::string kv_description() const;

  // BENCHMARKING AID, not for inference: brings the cache to n_past() + n_tokens without
  // running the model, by storing random K/V rows (approximately Gaussian, N(0, 1), from
  // seed) as text tokens through the KV method's normal store path, n_batch tokens per
  // step, so its windows, folds and segments are what a prefill of that length leaves.
  // Layers whose method needs attention statistics take them from random queries (their
  // probe rows only, ~10-20% of an attention pass).
  // The tokens have no meaning: only decode speed and memory over them are.
  Status fill_kv_for_benchmark(int64_t n_tokens, uint64_t seed);

 private:
  friend class Engine;
  friend struct SessionFile;
  Session(Engine::Impl* engine, int32_t seq);
  // first_row: rows of the layout already in the cache (a resumed checkpoint's; a segment
  // boundary). after_segment: called after each segment is fed (checkpoints stop it there).
  Status feed(const PromptLayout& layout, bool all_logits, std::vector<float>* logits,
              const ProgressCallback& progress, StreamedMediaEncoder* streamed = nullptr, int64_t first_row = 0,
              const std::function<Status(const FeedSegment&)>& after_segment = {});
  // A resumed checkpoint against the prompt it is to complete (session_resume.cpp): its rows,
  // layout and videos checked, the frames in the cache skipped in the streams.
  Status check_resume(const PromptLayout& layout, const PreparedPrompt& prompt, StreamedMediaEncoder* streamed) const;
  Status check_room(int64_t n_tokens, const char* what) const;
  void record_rows(const PromptLayout& layout, const FeedSegment& sg, int64_t begin, int64_t n);
  // Once per engine: a warning when the KV method degrades on a first prompt without visual tokens.
  void warn_if_text_only(int64_t n_visual_tokens);
  Status sample_loop(Sampler& sampler, std::vector<float>& logits, const GenerateParams& params,
                     const std::function<bool(const std::string&)>& on_piece, GenerateStats& st);
  Engine::Impl* engine_;
  int32_t seq_;
  int64_t n_past_ = 0;
  double streamed_encode_seconds_ = 0;  // the last eval_prompt's streamed frames: decoding + encoding
  int64_t streamed_frames_encoded_ = 0;  // and how many
  std::function<void(const LayerQk&)> observer_;  // empty: none
  int64_t next_pos_ = 0;  // RoPE position of the next token (M-RoPE media advance it by less than their tokens)
  std::unique_ptr<SessionHistory> history_;  // the rows the cache holds (KV files)
  std::unique_ptr<IngestCheckpointing> checkpointing_;  // null: none
  std::unique_ptr<IngestCheckpointState> resume_;       // a checkpoint loaded, not yet completed
};

// "512M", "4G", "1.5GiB", "1048576" → bytes. InvalidArgument on junk or overflow.
Result<uint64_t> parse_byte_size(const std::string& text);

}  // namespace vlkv
