// The public API: an Engine is a loaded model (weights, tokenizer, KV cache
// with its compression method); a Session is one conversation on it.
// Failures come back as Status; nothing here throws or exits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vlkv/sampler_params.h"
#include "vlkv/status.h"

namespace vlkv {

struct EngineParams {
  std::string model_path;
  std::string kv_method = "f16";             // KV method spec, e.g. "f32", "f16"
  uint64_t kv_budget_bytes = 2ull << 30;      // KV page pool budget
  int n_threads = 0;                          // 0: all cores
  int64_t n_ctx = 0;                          // max tokens per session; 0: the model's training context
  int64_t n_batch = 512;                      // prompt tokens per forward pass
};


struct GenerateParams {
  int64_t max_tokens = 128;
  bool ignore_eos = false;
  SamplerParams sampling;
};

struct GenerateStats {
  int64_t n_prompt_tokens = 0;
  int64_t n_generated = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  bool stopped_at_eos = false;
};

struct ModelInfo {
  std::string architecture;
  std::string name;
  int64_t n_vocab = 0, n_embd = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_ff = 0;
  int64_t n_ctx_train = 0;
  uint64_t weight_bytes = 0;
  std::string tokenizer_model;
  std::string chat_template;  // detected family name, "none" if none
};

class Session;

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

  // KV memory: bytes held now by all sessions, the budget, and the method's stored bits/element.
  uint64_t kv_bytes_in_use() const;
  double kv_bits_per_element() const;

  Result<std::unique_ptr<Session>> new_session();

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Session;
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

  int64_t n_past() const;
  int64_t n_vocab() const;

 private:
  friend class Engine;
  Session(Engine::Impl* engine, int32_t seq);
  Engine::Impl* engine_;
  int32_t seq_;
  int64_t n_past_ = 0;
};

// "512M", "4G", "1.5GiB", "1048576" → bytes. InvalidArgument on junk or overflow.
Result<uint64_t> parse_byte_size(const std::string& text);

}  // namespace vlkv
