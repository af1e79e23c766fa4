// OpenAI response bodies: chat.completion / text_completion objects, their streaming
// chunks (chat.completion.chunk) and Server-Sent Event framing, as OpenAI and
// llama-server send them, plus vlkv's "kv" extension object and llama-server's "timings".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/generation_backend.h"
#include "server/openai_request.h"

namespace vlkv::server {

// What every object of one response shares.
struct ResponseIds {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;     // "chatcmpl-..." / "cmpl-..."
  std::string model;  // the served model's name
  int64_t created = 0;  // Unix seconds
};

ResponseIds make_response_ids(Endpoint endpoint, const std::string& model);

// "stop" or "length" (ends other than these are errors and get no response object).
const char* finish_reason(GenerationEnd end);

nlohmann::json usage_json(const GenerationResult& r);
nlohmann::json kv_json(const KvUsage& kv);
// llama-server's "timings" (prompt_n/ms/per_second, predicted_n/ms/per_second; prompt_ms
// includes the vision encoder), plus queue_ms: submitted to started.
nlohmann::json timings_json(const GenerationResult& r);

// The whole answer (stream: false).
// logprobs: the choice's "logprobs" object (logprobs_json.h), null when not asked for.
nlohmann::json completion_json(const ResponseIds& ids, const std::string& text, const GenerationResult& r,
                               const nlohmann::json& logprobs = nullptr);

// Streaming: a chunk with new text (first: with the assistant role), the final chunk
// with finish_reason (and the kv and timings objects), and the usage chunk (empty choices).
// logprobs: those of the tokens the chunk carries (null: none or not asked for).
nlohmann::json text_chunk_json(const ResponseIds& ids, const std::string& text, bool first, bool include_usage,
                               const nlohmann::json& logprobs = nullptr);
nlohmann::json final_chunk_json(const ResponseIds& ids, const GenerationResult& r, bool include_usage,
                                const nlohmann::json& logprobs = nullptr);
nlohmann::json usage_chunk_json(const ResponseIds& ids, const GenerationResult& r);

// "data: <json>\n\n"; the stream ends with sse_done().
std::string sse_event(const nlohmann::json& j);
inline const char* sse_done() { return "data: [DONE]\n\n"; }

}  // namespace vlkv::server
