// Log-probabilities of a generation step, as llama-server reports them by default
// (post_sampling_probs off): log-softmax of the step's raw logits over the whole
// vocabulary, before temperature, top-k, top-p, min-p, the repetition penalty and any
// response_format mask. So they describe the model, not the sampler's final draw.
#pragma once

#include <cstdint>
#include <vector>

namespace vlkv::server {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
};

// One generated token: its own log-probability and the n most likely tokens of its step.
struct StepLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // most likely first; equal logits: lower id first
};

// log(sum(exp(logits))) in double, shifted by the maximum.
double log_sum_exp(const float* logits, int n_vocab);
// The n_top most likely tokens with logit - lse.
std::vector<TokenLogprob> top_logprobs(const float* logits, int n_vocab, int n_top, double lse);

}  // namespace vlkv::server
