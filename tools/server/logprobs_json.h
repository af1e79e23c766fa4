// The "logprobs" object of a choice: OpenAI chat's {"content": [{token, logprob, bytes,
// top_logprobs}]} and the legacy completions' {tokens, token_logprobs, top_logprobs,
// text_offset}. Token strings are the tokens' bytes (invalid UTF-8 is replaced when the
// body is written); "bytes" holds them exactly.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <vector>

#include "server/openai_request.h"
#include "server/token_logprobs.h"
#include "vlkv/engine.h"

namespace vlkv::server {

// text_offset: bytes of answer text before the first of these tokens; advanced past them
// (completions' text_offset, counted in bytes of the answer, not in characters).
nlohmann::json logprobs_json(Endpoint endpoint, const std::vector<StepLogprobs>& steps, const Engine& model,
                             size_t* text_offset);

}  // namespace vlkv::server
