// ZipVL's adaptive important-token ratio: the smallest set of tokens, taken by
// descending normalized attention score, that holds at least tau of the total score.
// Easy (peaked) attention keeps few tokens, flat attention many.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace vlkv::zipvl {

// flags[i] = 1 for the important tokens, 0 for the rest; returns their number.
// Ties are broken by position (earlier first), so the choice is deterministic. No mass
// at all (total 0, e.g. no statistics): nothing is important. Negative or NaN scores
// count as 0.
//   scores: [n], flags: [n] out
inline int64_t important_by_mass(const float* scores, int64_t n, double tau, uint8_t* flags) {
  if (n <= 0) return 0;
  std::fill(flags, flags + n, uint8_t{0});
  auto clean = [&](int64_t i) { return scores[i] > 0.0f ? static_cast<double>(scores[i]) : 0.0; };
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += clean(i);
  if (total <= 0.0) return 0;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return clean(a) > clean(b); });
  const double target = tau * total;
  double kept = 0.0;
  int64_t count = 0;
  // The relative slack absorbs rounding in the running sum (tau = 1 keeps every token with mass).
  while (count < n && kept < target * (1.0 - 1e-12) && clean(order[count]) > 0.0) {
    kept += clean(order[count]);
    flags[order[count++]] = 1;
  }
  return count;
}

}  // namespace vlkv::zipvl
