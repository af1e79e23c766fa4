// One request's LogitsProcessor (vlkv/logits_processor.h): records the logprobs it asked
// for and, under a response_format, masks the tokens that would leave the JSON grammar
// (and end-of-generation until the document is whole). Lives on the generating thread;
// the server's on_piece callback (same thread) takes each token's record.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "server/json_recognizer.h"
#include "server/token_logprobs.h"
#include "server/token_mask.h"
#include "vlkv/logits_processor.h"

namespace vlkv::server {

class SamplingHook final : public LogitsProcessor {
 public:
  // n_logprobs: -1 for none, else how many top tokens per step (0: the chosen one only).
  // grammar: null for free text; table: the model's (token_table_for).
  SamplingHook(int n_logprobs, std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTable> table);

  void before_sampling(float* logits, int n_vocab) override;
  void after_sampling(int32_t token) override;

  bool wants_logprobs() const { return n_logprobs_ >= 0; }
  // The oldest sampled token's record not yet taken (on_piece: the piece's own token).
  StepLogprobs take_logprobs();
  // Constrained: the document is whole and nothing may follow.
  bool document_finished() const { return recognizer_ && recognizer_->finished(); }
  // Constrained: a step where no token of the vocabulary could continue the document (or
  // the sampled one did not): the output is not a valid document.
  bool dead_end() const { return dead_end_; }

 private:
  int n_logprobs_;
  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenTable> table_;
  std::unique_ptr<JsonRecognizer> recognizer_;
  std::vector<JsonRecognizer> scratch_;
  std::vector<uint8_t> allowed_;
  std::vector<float> raw_;       // [n_vocab] this step's raw logits (logprobs only)
  double lse_ = 0;
  std::vector<TokenLogprob> top_;
  std::deque<StepLogprobs> records_;
  bool dead_end_ = false;
};

}  // namespace vlkv::server
