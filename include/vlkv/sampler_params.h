// Sampling parameters of the public API, with the table (visit) that drives the
// CLI flags, JSON and benchmark output (DESIGN.md: one table per parameter struct).
#pragma once

#include <cstdint>

#include "vlkv/param_field.h"

namespace vlkv {

struct SamplerParams {
  static constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;  // as LLAMA_DEFAULT_SEED: seed from the OS

  float temperature = 0.8f;     // <= 0: greedy (argmax)
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // in (0, 1]; 1: off
  float min_p = 0.05f;          // in [0, 1]; 0: off
  float repeat_penalty = 1.0f;  // > 0; 1: off
  int32_t repeat_last_n = 64;   // tokens of history penalized; 0: off, -1: all accepted tokens
  uint32_t seed = kRandomSeed;

  // The parameter table (DESIGN.md): calls v(field, ParamField) for every field, in order.
  // The default is the field's value in SamplerParams{}. Drives the CLI flags (checked
  // against the ranges), the server's JSON and validate_sampler_params.
  template <typename Self, typename Visitor>
  static void visit(Self& p, Visitor&& v) {
    v(p.temperature, ParamField{"--temp", "temperature", "sampling temperature; <= 0 picks the most likely token"});
    v(p.top_k, ParamField{"--top-k", "top_k", "keep the k most likely tokens; <= 0 keeps all"});
    v(p.top_p, ParamField{"--top-p", "top_p", "keep the smallest set of tokens whose probability reaches p; 1 = off",
                         0, 1, /*min_open=*/true});
    v(p.min_p, ParamField{"--min-p", "min_p", "drop tokens less likely than min_p times the most likely; 0 = off", 0, 1});
    v(p.repeat_penalty, ParamField{"--repeat-penalty", "repeat_penalty", "divide logits of recent tokens by this; 1 = off",
                                  0, HUGE_VAL, /*min_open=*/true});
    v(p.repeat_last_n, ParamField{"--repeat-last-n", "repeat_last_n", "how many recent tokens to penalize; 0 = off, -1 = all",
                                 -1});
    v(p.seed, ParamField{"-s,--seed", "seed", "random seed; 4294967295 = random"});
  }
};

}  // namespace vlkv
