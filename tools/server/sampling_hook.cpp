#include "server/sampling_hook.h"

#include <algorithm>
#include <cmath>

namespace vlkv::server {

SamplingHook::SamplingHook(int n_logprobs, std::shared_ptr<const JsonGrammar> grammar,
                           std::shared_ptr<const TokenTable> table)
    : n_logprobs_(n_logprobs), grammar_(std::move(grammar)), table_(std::move(table)) {
  if (grammar_) recognizer_ = std::make_unique<JsonRecognizer>(*grammar_);
}

void SamplingHook::before_sampling(float* logits, int n_vocab) {
  // Logprobs first: they describe the raw logits, not the mask (as llama-server's do not
  // include its grammar).
  if (n_logprobs_ >= 0) {
    raw_.assign(logits, logits + n_vocab);
    lse_ = log_sum_exp(logits, n_vocab);
    top_ = top_logprobs(logits, n_vocab, n_logprobs_, lse_);
  }
  if (!recognizer_) return;
  if (dead_end_) {  // the document cannot go on: end it
    if (table_->end_of_generation.empty()) return;
    std::fill(logits, logits + n_vocab, -INFINITY);
    for (int32_t t : table_->end_of_generation)
      if (t < n_vocab) logits[t] = 0;
    return;
  }
  allowed_tokens(*table_, *recognizer_, scratch_, &allowed_);
  const bool whole = recognizer_->complete();
  for (int32_t t : table_->end_of_generation)
    if (t < static_cast<int32_t>(allowed_.size())) allowed_[t] = whole ? 1 : 0;
  const int n = std::min<int>(n_vocab, static_cast<int>(allowed_.size()));
  bool any = false;
  for (int t = 0; t < n; ++t) any = any || allowed_[t];
  if (!any) {
    // Nothing continues the document: end it (the server reports the dead end).
    dead_end_ = true;
    for (int32_t t : table_->end_of_generation) allowed_[t] = 1;
  }
  for (int t = 0; t < n_vocab; ++t)
    if (t >= n || !allowed_[t]) logits[t] = -INFINITY;
}

void SamplingHook::after_sampling(int32_t token) {
  if (n_logprobs_ >= 0) {
    StepLogprobs r;
    r.chosen = {token, static_cast<float>(raw_[token] - lse_)};
    r.top = std::move(top_);
    records_.push_back(std::move(r));
  }
  if (!recognizer_ || token < 0 || static_cast<size_t>(token) >= table_->pieces.size()) return;
  if (std::find(table_->end_of_generation.begin(), table_->end_of_generation.end(), token) !=
      table_->end_of_generation.end())
    return;
  const std::string& piece = table_->pieces[token];
  if (piece.empty() || !recognizer_->feed(piece)) dead_end_ = true;
}

StepLogprobs SamplingHook::take_logprobs() {
  if (records_.empty()) return {};
  StepLogprobs r = std::move(records_.front());
  records_.pop_front();
  return r;
}

}  // namespace vlkv::server
