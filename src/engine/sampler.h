// Token sampling from logits, as llama.cpp's default chain: repetition penalty ->
// top-k -> top-p -> min-p -> temperature -> softmax -> seeded draw; greedy when temperature <= 0.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "text/tokenizer.h"
#include "vlkv/logits_processor.h"
#include "vlkv/sampler_params.h"
#include "vlkv/status.h"

namespace vlkv {


// Ok, or InvalidArgument naming the absurd field (nan, top_p outside (0,1], ...).
// A negative temperature is valid and means greedy, as in llama.cpp.
Status validate_sampler_params(const SamplerParams& p);

// One per sequence: holds the RNG and the repetition history. Not thread-safe.
class Sampler {
 public:
  // Params must pass validate_sampler_params (checked: aborts otherwise).
  explicit Sampler(const SamplerParams& params);
  // Validates first; the error is InvalidArgument.
  static Result<Sampler> create(const SamplerParams& params);

  // Picks the next token from logits[n_vocab]. Does not add it to the history: call accept().
  TokenId sample(const float* logits, int n_vocab);
  // Adds a token (prompt or generated) to the repetition history.
  void accept(TokenId token);
  // Clears the history and reseeds.
  void reset();

  const SamplerParams& params() const { return params_; }

 private:
  struct Candidate {
    TokenId id;
    float logit;
  };

  void apply_repeat_penalty(std::vector<Candidate>& cur) const;

  SamplerParams params_;
  std::mt19937 rng_;
  std::vector<TokenId> history_;    // most recent last; at most repeat_last_n entries
  std::vector<Candidate> scratch_;  // [n_vocab] candidates, reused between calls
};

// One generation step's pick: the processor (null: none) sees the raw logits (and may mask
// them), the sampler draws and accepts the token, the processor hears which one.
TokenId sample_step(Sampler& sampler, LogitsProcessor* processor, float* logits, int n_vocab);

}  // namespace vlkv
