#include "vlkv/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "base/log.h"
#include "engine/content_hash.h"
#include "engine/engine_impl.h"
#include "engine/gguf_identity.h"
#include "engine/media_cache.h"
#include "kv/page_pool.h"  // format_bytes

namespace vlkv {

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

namespace {

// The number fields' ranges of EngineParams' table (the CLI checks the same rows).
Status validate_engine_params(const EngineParams& params) {
  Status st = Status::ok();
  EngineParams::visit(params, [&](const auto& field, const ParamField& info) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(field)>>)
      if (st.is_ok()) st = check_param(info, static_cast<double>(field));
  });
  return st;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::load(const EngineParams& params) {
  auto impl = std::make_unique<Impl>();
  impl->params = params;
  const std::string& path = params.model_path;
  VLKV_RETURN_IF_ERROR(validate_engine_params(params));

  VLKV_ASSIGN_OR_RETURN(impl->gguf, GgufFile::open(path));
  const GgufFile& g = *impl->gguf;
  impl->model_id = gguf_identity(g);
  Result<TextHparams> hp = read_text_hparams(g);
  if (!hp.is_ok()) return hp.status().with_context(path);
  impl->hparams = *hp;
  impl->gguf->prefault();  // the first prompt's prefill does not page the weights in (before the
                           // repack at bind, which releases the pages it copied)
  const int n_threads = params.n_threads > 0 ? params.n_threads : ThreadPool::default_threads();
  impl->pool = std::make_unique<ThreadPool>(n_threads);  // before bind: the repack runs on it
  Result<TextWeights> w = bind_text_weights(g, impl->hparams, !params.exact_matmul, /*pack_rows=*/true, impl->pool.get());
  if (!w.is_ok()) return w.status().with_context(path);
  impl->weights = std::move(w).value();
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(g);
  if (!tok.is_ok()) return tok.status().with_context(path);
  impl->tokenizer = std::move(tok).value();
  if (impl->tokenizer->n_vocab() > impl->hparams.n_vocab) {
    return invalid_file(path + ": tokenizer has " + std::to_string(impl->tokenizer->n_vocab()) +
                        " tokens but token_embd only " + std::to_string(impl->hparams.n_vocab) + " rows");
  }
  impl->chat_template = detect_chat_template(g);
  impl->decoder = std::make_unique<TextDecoder>(impl->hparams, impl->weights);

  if (!params.mmproj_path.empty()) {
    VLKV_ASSIGN_OR_RETURN(impl->mmproj, GgufFile::open(params.mmproj_path));
    VLKV_ASSIGN_OR_RETURN(impl->vision, VisionModel::load(*impl->mmproj));
    Result<std::optional<VideoFrameLabels>> labels = read_video_frame_labels(*impl->mmproj, *impl->vision);
    if (!labels.is_ok()) return labels.status().with_context(params.mmproj_path);
    impl->video_frame_labels = std::move(labels).value();
    impl->mmproj->prefault();
    if (impl->vision->n_embd_out() != impl->hparams.n_embd_inp()) {
      return invalid_argument(params.mmproj_path + ": the projector outputs embeddings of size " +
                              std::to_string(impl->vision->n_embd_out()) + " but the text model " + path +
                              " takes input embeddings of size " + std::to_string(impl->hparams.n_embd_inp()) +
                              " (n_embd " + std::to_string(impl->hparams.n_embd) + " x (1 + " +
                              std::to_string(impl->hparams.n_deepstack_layers) +
                              " deepstack layers); this mmproj belongs to another model)");
    }
    impl->mmproj_id = gguf_identity(*impl->mmproj);
    impl->media_id = impl->mmproj_id;
    if (params.image_min_tokens > 0 || params.image_max_tokens > 0) {
      if (Status st = impl->vision->set_image_tokens(params.image_min_tokens, params.image_max_tokens); !st.is_ok())
        return st.with_context(params.mmproj_path);
      Sha256 h;
      h.update_string("vlkv image tokens v1");
      h.update_value(impl->mmproj_id.hi);
      h.update_value(impl->mmproj_id.lo);
      h.update_value(params.image_min_tokens);
      h.update_value(params.image_max_tokens);
      impl->media_id = h.finish128();
    }
    if (params.media_cache_bytes > 0) impl->media_cache = std::make_shared<MediaCache>(params.media_cache_bytes);
  } else if (params.image_min_tokens > 0 || params.image_max_tokens > 0) {
    return invalid_argument("--image-min-tokens / --image-max-tokens need a vision model (--mmproj)");
  }

  if (impl->params.n_ctx == 0) impl->params.n_ctx = impl->hparams.n_ctx_train;

  // Identifies the weights (Q Cache calibration maps are checked against it).
  uint64_t fingerprint = 0xcbf29ce484222325ull;  // FNV-1a over names, types and shapes
  auto mix = [&fingerprint](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) fingerprint = (fingerprint ^ static_cast<const uint8_t*>(p)[i]) * 0x100000001b3ull;
  };
  for (const GgufTensorInfo& t : g.tensors()) {
    mix(t.name.data(), t.name.size());
    const uint32_t type = static_cast<uint32_t>(t.type);
    mix(&type, sizeof type);
    for (int64_t d : t.dims) mix(&d, sizeof d);
  }

  KvCacheConfig kv;
  kv.geometry = {static_cast<int>(impl->hparams.n_layers), static_cast<int>(impl->hparams.n_heads),
                 static_cast<int>(impl->hparams.n_kv_heads), static_cast<int>(impl->hparams.head_dim), fingerprint};
  kv.geometry.layer_window = kv_layer_windows(impl->hparams);  // gemma3's sliding layers
  kv.method = params.kv_method;
  kv.budget_bytes = params.kv_budget_bytes;
  if (params.kv_page_bytes != 0) kv.page_bytes = params.kv_page_bytes;
  kv.max_tokens_per_seq = static_cast<int>(std::min<int64_t>(impl->params.n_ctx, std::numeric_limits<int>::max()));
  Result<std::unique_ptr<KvCache>> cache = KvCache::create(kv);
  if (!cache.is_ok()) return cache.status();
  impl->kv = std::move(cache).value();

  ModelInfo& info = impl->info;
  const TextHparams& h = impl->hparams;
  info.architecture = h.arch_name;
  Result<std::string> name = g.get_string("general.name");
  info.name = name.is_ok() ? *name : "";
  info.n_vocab = h.n_vocab;
  info.n_embd = h.n_embd;
  info.n_layers = h.n_layers;
  info.n_heads = h.n_heads;
  info.n_kv_heads = h.n_kv_heads;
  info.head_dim = h.head_dim;
  info.n_ff = h.n_ff;
  info.n_ctx_train = h.n_ctx_train;
  info.weight_bytes = impl->weights.total_bytes;
  info.tokenizer_model = impl->tokenizer->model_name();
  info.chat_template = chat_template_name(impl->chat_template);
  info.fingerprint = fingerprint;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

bool Engine::has_vision() const { return impl_->vision != nullptr; }
std::string Engine::projector_type() const {
  return impl_->vision ? std::string(impl_->vision->projector_type()) : std::string();
}

const ModelInfo& Engine::info() const { return impl_->info; }
const EngineParams& Engine::params() const { return impl_->params; }
int Engine::n_threads() const { return impl_->pool->n_threads(); }

std::vector<int32_t> Engine::tokenize(const std::string& text, bool add_special, bool parse_special) const {
  return impl_->tokenizer->encode(text, add_special, parse_special);
}
std::string Engine::token_to_piece(int32_t token) const { return impl_->tokenizer->token_to_piece(token); }
bool Engine::is_end_of_generation(int32_t token) const { return impl_->tokenizer->is_end_of_generation(token); }

std::string Engine::apply_chat_template(const std::string& user_message) const {
  return apply_chat_template(std::vector<ChatTurn>{{"user", user_message}});
}

std::string Engine::apply_chat_template(const std::vector<ChatTurn>& conversation, bool add_generation_prompt) const {
  std::vector<ChatMessage> messages;
  messages.reserve(conversation.size());
  for (const ChatTurn& t : conversation) messages.push_back({t.role, t.content});
  // kNone concatenates the contents unchanged (one user message: the message itself).
  return vlkv::apply_chat_template(impl_->chat_template, messages, add_generation_prompt);
}

uint64_t Engine::kv_bytes_in_use() const { return impl_->kv->bytes_in_use(); }
double Engine::kv_bits_per_element() const { return impl_->kv->bits_per_element(); }
double Engine::kv_bytes_per_token() const { return impl_->kv->bytes_per_token(); }

Result<uint64_t> Engine::kv_bytes_for_tokens(int64_t n_tokens, const std::string& kv_method) const {
  if (n_tokens < 0) return invalid_argument("negative token count");
  std::lock_guard<std::mutex> lock(impl_->forward_mutex);
  return impl_->kv->max_bytes_for_tokens(n_tokens, kv_method);
}

Result<double> Engine::kv_bits_per_element(const std::string& kv_method) const {
  std::lock_guard<std::mutex> lock(impl_->forward_mutex);
  return impl_->kv->method_bits_per_element(kv_method);
}

Result<double> Engine::kv_codec_bytes_for_tokens(int64_t n_tokens, const std::string& kv_method) const {
  if (n_tokens < 0) return invalid_argument("negative token count");
  std::lock_guard<std::mutex> lock(impl_->forward_mutex);
  return impl_->kv->method_bytes_for_tokens(n_tokens, kv_method);
}

// What makes a long prompt fit: a larger context while the model takes one, and for media
// fewer frames or pixels (the flags of run, chat and serve that set them).
static std::string prompt_room_advice(int64_t n_ctx, int64_t n_ctx_train, bool has_media) {
  std::string advice;
  if (n_ctx < n_ctx_train) advice = "raise --ctx-size, up to the model's " + std::to_string(n_ctx_train);
  else advice = "the model's whole context";
  if (has_media)
    advice += "; or fewer frames (--frames, --fps, --max-frames) or smaller images and frames (--max-image-pixels)";
  return advice;
}

Status Engine::check_prompt_fits(int64_t n_prompt_tokens, int64_t n_reserve, const std::string& kv_method,
                                 const std::string& what) const {
  if (n_prompt_tokens < 0 || n_reserve < 0) return invalid_argument("negative token count");
  const std::string of = what.empty() ? std::string() : " (" + what + ")";
  const int64_t n_ctx = impl_->params.n_ctx;
  if (n_prompt_tokens + n_reserve > n_ctx) {
    return invalid_argument("context full: the prompt is " + std::to_string(n_prompt_tokens) + " tokens" + of +
                            (n_reserve > 0 ? " and needs room for " + std::to_string(n_reserve) + " more" : std::string()) +
                            ", over the context size of " + std::to_string(n_ctx) + " (" +
                            prompt_room_advice(n_ctx, impl_->hparams.n_ctx_train, !what.empty()) + ")");
  }
  VLKV_ASSIGN_OR_RETURN(const uint64_t bytes, kv_bytes_for_tokens(n_prompt_tokens + n_reserve, kv_method));
  const uint64_t budget = impl_->kv->budget_bytes();
  if (bytes > budget) {
    return invalid_argument("the prompt is " + std::to_string(n_prompt_tokens) + " tokens" + of + ": with " +
                            std::to_string(n_reserve) + " generated it needs up to " + format_bytes(bytes) +
                            " of KV cache (method " + (kv_method.empty() ? impl_->kv->method_name() : kv_method) +
                            ") but the KV budget is " + format_bytes(budget) + " (raise --kv-budget)");
  }
  return Status::ok();
}

Result<std::unique_ptr<Session>> Engine::new_session(const std::string& kv_method) {
  std::lock_guard<std::mutex> lock(impl_->forward_mutex);
  VLKV_ASSIGN_OR_RETURN(SeqId seq, impl_->kv->add_sequence(kv_method));
  return std::unique_ptr<Session>(new Session(impl_.get(), seq));
}

Result<uint64_t> parse_byte_size(const std::string& text) {
  if (text.empty()) return invalid_argument("empty size");
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !std::isfinite(value) || value < 0) {
    return invalid_argument("'" + text + "' is not a size (examples: 512M, 4G, 1073741824)");
  }
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
  else return invalid_argument("'" + text + "': unknown size unit '" + std::string(end) + "' (use K, M, G, T)");
  const double bytes = value * mult;
  if (bytes >= 1.8e19) return invalid_argument("'" + text + "' is too large");
  return static_cast<uint64_t>(bytes);
}

}  // namespace vlkv
