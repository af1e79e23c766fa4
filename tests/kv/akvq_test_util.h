// Helpers of the AKVQ-VL tests (akvq_vl_test.cpp, akvq_vl_saliency_test.cpp): token kinds
// as runs, and hand-made attention masses.
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "kv/methods/akvq_vl/saliency.h"
#include "kv/token_kind.h"

namespace vlkv::akvqtest {

constexpr TokenKind kT = TokenKind::kText, kV = TokenKind::kVisual, kS = TokenKind::kSpecial;

// Kinds from (kind, count) runs, e.g. {{kT, 5}, {kV, 100}}.
inline std::vector<TokenKind> kinds_of(std::initializer_list<std::pair<TokenKind, int>> runs) {
  std::vector<TokenKind> out;
  for (auto [k, n] : runs) out.insert(out.end(), n, k);
  return out;
}

inline akvq::KindRuns runs_of(const std::vector<TokenKind>& kinds) {
  akvq::KindRuns r;
  r.append(kinds.data(), static_cast<int64_t>(kinds.size()));
  return r;
}

// One head's mass over `kinds`: `text` per text token, `visual` per visual token.
inline std::vector<float> flat_mass(const std::vector<TokenKind>& kinds, float text, float visual) {
  std::vector<float> m;
  for (TokenKind k : kinds) m.push_back(k == kV ? visual : text);
  return m;
}

}  // namespace vlkv::akvqtest
