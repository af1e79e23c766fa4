#include <chrono>
#include <string>

#include "engine/engine_impl.h"
#include "engine/sampler.h"

namespace vlkv {

Session::Session(Engine::Impl* engine, int32_t seq) : engine_(engine), seq_(seq) {}

Session::~Session() {
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  engine_->kv->remove_sequence(seq_);
}

int64_t Session::n_past() const { return n_past_; }
int64_t Session::n_vocab() const { return engine_->hparams.n_vocab; }

Status Session::eval(const std::vector<int32_t>& tokens, bool all_logits, std::vector<float>* logits) {
  if (tokens.empty()) return invalid_argument("nothing to evaluate: empty token list");
  const int64_t n_ctx = engine_->params.n_ctx;
  if (n_past_ + static_cast<int64_t>(tokens.size()) > n_ctx) {
    return invalid_argument("context full: " + std::to_string(n_past_) + " + " + std::to_string(tokens.size()) +
                            " tokens exceed the context size of " + std::to_string(n_ctx) + " (raise --ctx-size)");
  }
  std::lock_guard<std::mutex> lock(engine_->forward_mutex);
  const int64_t n_vocab = engine_->hparams.n_vocab;
  const int64_t n_batch = engine_->params.n_batch;
  if (logits) logits->clear();
  std::vector<float> chunk_logits;
  std::vector<int64_t> positions;
  std::vector<TokenKind> kinds;
  for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(n_batch)) {
    const size_t end = std::min(tokens.size(), begin + static_cast<size_t>(n_batch));
    const int64_t n = static_cast<int64_t>(end - begin);
    positions.resize(n);
    kinds.assign(n, TokenKind::kText);
    for (int64_t i = 0; i < n; ++i) positions[i] = n_past_ + i;
    DecoderInput in;
    in.n_tokens = n;
    in.tokens = tokens.data() + begin;
    in.positions = positions.data();
    in.kinds = kinds.data();
    const bool last_chunk = end == tokens.size();
    LogitsMode mode = !logits ? LogitsMode::kNone
                      : all_logits ? LogitsMode::kAll
                      : last_chunk ? LogitsMode::kLast
                                   : LogitsMode::kNone;
    VLKV_RETURN_IF_ERROR(engine_->decoder->forward(in, *engine_->kv, seq_, mode, chunk_logits, *engine_->pool));
    n_past_ += n;
    if (logits && mode != LogitsMode::kNone) {
      logits->insert(logits->end(), chunk_logits.begin(), chunk_logits.end());
    }
  }
  if (logits && !all_logits && static_cast<int64_t>(logits->size()) != n_vocab) {
    return Status(StatusCode::kInternal, "logits size mismatch");
  }
  return Status::ok();
}

Status Session::generate(const std::string& prompt, const GenerateParams& params,
                         const std::function<bool(const std::string&)>& on_piece, GenerateStats* stats) {
  using Clock = std::chrono::steady_clock;
  if (params.max_tokens < 0) return invalid_argument("number of tokens to generate must be >= 0");
  const SamplerParams& sp = params.sampling;
  VLKV_RETURN_IF_ERROR(validate_sampler_params(sp));
  Sampler sampler(sp);

  // The first turn of a session gets BOS as the tokenizer's metadata says.
  std::vector<int32_t> prompt_tokens = engine_->tokenizer->encode(prompt, /*add_special=*/n_past_ == 0,
                                                                  /*parse_special=*/true);
  if (prompt_tokens.empty()) return invalid_argument("the prompt is empty after tokenization");
  for (int32_t t : prompt_tokens) sampler.accept(t);

  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  st = GenerateStats{};
  st.n_prompt_tokens = static_cast<int64_t>(prompt_tokens.size());
  std::vector<float> logits;
  auto t0 = Clock::now();
  VLKV_RETURN_IF_ERROR(eval(prompt_tokens, false, &logits));
  st.prefill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  const int n_vocab = static_cast<int>(engine_->hparams.n_vocab);
  auto t1 = Clock::now();
  for (int64_t i = 0; i < params.max_tokens; ++i) {
    const TokenId next = sampler.sample(logits.data(), n_vocab);
    sampler.accept(next);
    if (!params.ignore_eos && engine_->tokenizer->is_end_of_generation(next)) {
      st.stopped_at_eos = true;
      break;
    }
    ++st.n_generated;
    if (on_piece && !on_piece(engine_->tokenizer->token_to_piece(next))) break;
    if (i + 1 == params.max_tokens) break;  // no need to evaluate the last token
    Status s = eval({next}, false, &logits);
    if (!s.is_ok()) {
      st.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
      return s;
    }
  }
  st.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return Status::ok();
}

}  // namespace vlkv
