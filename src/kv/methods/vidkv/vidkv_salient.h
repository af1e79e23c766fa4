// VidKV's salient visual tokens (arXiv 2503.16257): of the N visual tokens of a step, the
// k = max(32, floor(N * p / 32) * 32) (at most N) most similar to the text get 2-bit values
// instead of ternary. Similarity: mean dot product of a visual token's embedding with the
// prompt's text token embeddings, computed by the engine (StoreInput::visual_similarity).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kv/token_kind.h"

namespace vlkv::vidkv {

// k for N visual tokens at fraction p (the paper's rule, capped at N).
inline int64_t salient_count(int64_t n_visual, double p) {
  if (n_visual <= 0) return 0;
  const int64_t k = std::max<int64_t>(32, static_cast<int64_t>(std::floor(static_cast<double>(n_visual) * p / 32.0)) * 32);
  return std::min(k, n_visual);
}

// Flags [n]: 1 for the salient visual tokens. similarity: [n], read where kinds == kVisual
// (a NaN there counts as least similar); null -> no token is salient. Ties: earlier token first.
inline std::vector<uint8_t> select_salient(const TokenKind* kinds, const float* similarity, int64_t n, double p) {
  std::vector<uint8_t> flags(static_cast<size_t>(n), 0);
  if (!similarity || !kinds || p <= 0) return flags;
  std::vector<int64_t> visual;
  for (int64_t i = 0; i < n; ++i)
    if (kinds[i] == TokenKind::kVisual) visual.push_back(i);
  const int64_t k = salient_count(static_cast<int64_t>(visual.size()), p);
  auto score = [&](int64_t i) { return std::isnan(similarity[i]) ? -INFINITY : similarity[i]; };
  std::stable_sort(visual.begin(), visual.end(), [&](int64_t a, int64_t b) { return score(a) > score(b); });
  for (int64_t j = 0; j < k; ++j) flags[static_cast<size_t>(visual[j])] = 1;
  return flags;
}

}  // namespace vlkv::vidkv
