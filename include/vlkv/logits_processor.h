// A hook between a generation step's logits and its sampler, for what a front end adds to
// sampling: log-probabilities of the raw logits (vlkv serve's logprobs) and masks
// (constrained decoding, vlkv serve's response_format). Set in GenerateParams.
#pragma once

#include <cstdint>

namespace vlkv {

// Called on the thread that generates (a Session's caller, or the Scheduler's stepping
// thread), once per sampled token, in order: before_sampling, then after_sampling.
class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // logits[n_vocab]: the step's raw logits as the model computed them, before the sampler's
  // repetition penalty, top-k, top-p, min-p and temperature. An entry set to -infinity
  // cannot be sampled; at least one must stay finite.
  virtual void before_sampling(float* logits, int n_vocab) = 0;
  // The token sampled from them (an end-of-generation token too).
  virtual void after_sampling(int32_t token) = 0;
};

}  // namespace vlkv
