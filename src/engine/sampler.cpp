// The llama.cpp sampler chain (src/llama-sampling.cpp) for one sequence, in the same
// order and with the same cut rules, so a seeded run is reproducible here.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

#include "base/check.h"

namespace vlkv {

// The ranges of SamplerParams' table (the CLI and the server check the same rows).
Status validate_sampler_params(const SamplerParams& p) {
  Status st = Status::ok();
  SamplerParams::visit(p, [&](const auto& field, const ParamField& info) {
    if (st.is_ok()) st = check_param(info, static_cast<double>(field));
  });
  return st;
}

Sampler::Sampler(const SamplerParams& params) : params_(params) {
  VLKV_CHECK_MSG(validate_sampler_params(params).is_ok(), "invalid SamplerParams");
  reset();
}

Result<Sampler> Sampler::create(const SamplerParams& params) {
  VLKV_RETURN_IF_ERROR(validate_sampler_params(params).with_context("sampler"));
  return Sampler(params);
}

void Sampler::reset() {
  history_.clear();
  const uint32_t seed =
      params_.seed == SamplerParams::kRandomSeed ? std::random_device{}() : params_.seed;
  rng_.seed(seed);
}

void Sampler::accept(TokenId token) {
  if (params_.repeat_last_n == 0) return;
  history_.push_back(token);
  if (params_.repeat_last_n > 0 && history_.size() > static_cast<size_t>(params_.repeat_last_n))
    history_.erase(history_.begin(), history_.end() - params_.repeat_last_n);
}

// llama_sampler_penalties: each distinct recent token once; positive logits are divided,
// non-positive ones multiplied, so the token always becomes less likely.
void Sampler::apply_repeat_penalty(std::vector<Candidate>& cur) const {
  if (params_.repeat_penalty == 1.0f || history_.empty()) return;
  std::unordered_set<TokenId> seen(history_.begin(), history_.end());
  const TokenId n_vocab = static_cast<TokenId>(cur.size());
  for (TokenId id : seen) {
    if (id < 0 || id >= n_vocab) continue;
    float& l = cur[id].logit;  // still indexed by id: penalties come first in the chain
    l = l <= 0.0f ? l * params_.repeat_penalty : l / params_.repeat_penalty;
  }
}

TokenId Sampler::sample(const float* logits, int n_vocab) {
  VLKV_CHECK(n_vocab > 0);
  std::vector<Candidate>& cur = scratch_;
  cur.resize(n_vocab);
  for (int i = 0; i < n_vocab; ++i) cur[i] = {static_cast<TokenId>(i), logits[i]};
  apply_repeat_penalty(cur);

  if (params_.temperature <= 0.0f) {  // greedy: first (lowest id) maximum
    int best = 0;
    for (int i = 1; i < n_vocab; ++i)
      if (cur[i].logit > cur[best].logit) best = i;
    return cur[best].id;
  }

  // Descending by logit; equal logits by id so the result never depends on sort internals.
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  // top-k (<= 0: all tokens). Everything after this point sees sorted candidates.
  size_t n = cur.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(cur.begin(), cur.begin() + n, cur.end(), by_logit);
    cur.resize(n);
  } else {
    std::sort(cur.begin(), cur.end(), by_logit);
  }

  // top-p on the probabilities at temperature 1: keep the shortest prefix reaching top_p.
  if (params_.top_p < 1.0f) {
    const float max = cur[0].logit;
    double sum = 0.0;
    for (const Candidate& c : cur) sum += std::exp(c.logit - max);
    double cum = 0.0;
    for (size_t i = 0; i < cur.size(); ++i) {
      cum += std::exp(cur[i].logit - max) / sum;
      if (cum >= params_.top_p) {
        cur.resize(i + 1);
        break;
      }
    }
  }

  // min-p: keep tokens with p >= min_p * p_max, i.e. logit >= max_logit + log(min_p).
  if (params_.min_p > 0.0f) {
    const float min_logit = cur[0].logit + std::log(params_.min_p);
    size_t keep = 1;
    while (keep < cur.size() && cur[keep].logit >= min_logit) ++keep;
    cur.resize(keep);
  }

  // temperature, softmax, draw.
  const float max = cur[0].logit / params_.temperature;
  double sum = 0.0;
  for (Candidate& c : cur) {
    c.logit = std::exp(c.logit / params_.temperature - max);  // now an unnormalized probability
    sum += c.logit;
  }
  // A uniform in [0, 1) straight from the engine's 32-bit output: portable across
  // standard libraries (std::uniform_real_distribution is not), so seeds reproduce anywhere.
  const double u = static_cast<double>(rng_()) * (1.0 / 4294967296.0) * sum;
  double cum = 0.0;
  for (const Candidate& c : cur) {
    cum += c.logit;
    if (u < cum) return c.id;
  }
  return cur.back().id;  // rounding left u at the very end
}

TokenId sample_step(Sampler& sampler, LogitsProcessor* processor, float* logits, int n_vocab) {
  if (processor) processor->before_sampling(logits, n_vocab);
  const TokenId next = sampler.sample(logits, n_vocab);
  sampler.accept(next);
  if (processor) processor->after_sampling(next);
  return next;
}

}  // namespace vlkv
