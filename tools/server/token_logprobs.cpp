#include "server/token_logprobs.h"

#include <algorithm>
#include <cmath>

namespace vlkv::server {

double log_sum_exp(const float* logits, int n_vocab) {
  float max = -INFINITY;
  for (int i = 0; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  return max + std::log(sum);
}

std::vector<TokenLogprob> top_logprobs(const float* logits, int n_vocab, int n_top, double lse) {
  std::vector<int32_t> ids(n_vocab);
  for (int i = 0; i < n_vocab; ++i) ids[i] = i;
  const int n = std::min(n_top, n_vocab);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<TokenLogprob> top(n);
  for (int i = 0; i < n; ++i) top[i] = {ids[i], static_cast<float>(logits[ids[i]] - lse)};
  return top;
}

}  // namespace vlkv::server
