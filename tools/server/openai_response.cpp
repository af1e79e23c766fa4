#include "server/openai_response.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "server/api_error.h"

namespace vlkv::server {

using nlohmann::json;

ResponseIds make_response_ids(Endpoint endpoint, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[48];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  ResponseIds ids;
  ids.endpoint = endpoint;
  ids.id = std::string(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + buf;
  ids.model = model;
  ids.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return ids;
}

const char* finish_reason(GenerationEnd end) { return end == GenerationEnd::kLength ? "length" : "stop"; }

json usage_json(const GenerationResult& r) {
  // OpenAI's prompt caching field: prompt tokens served from the prefix cache.
  return {{"prompt_tokens", r.stats.n_prompt_tokens},
          {"completion_tokens", r.stats.n_generated},
          {"total_tokens", r.stats.n_prompt_tokens + r.stats.n_generated},
          {"prompt_tokens_details", {{"cached_tokens", r.stats.n_cached_tokens}}}};
}

json kv_json(const KvUsage& kv) {
  return {{"method", kv.method},
          {"bits_per_element", kv.bits_per_element},
          {"bytes_per_token", kv.bytes_per_token},
          {"held_bytes", kv.held_bytes}};
}

json timings_json(const GenerationResult& r) {
  const GenerateStats& s = r.stats;
  const double prompt_ms = (s.encode_seconds + s.prefill_seconds) * 1e3;
  const double predicted_ms = s.decode_seconds * 1e3;
  auto per_second = [](int64_t n, double ms) { return ms > 0 ? n * 1e3 / ms : 0.0; };
  return {{"prompt_n", s.n_prompt_tokens},
          {"prompt_ms", prompt_ms},
          {"prompt_per_second", per_second(s.n_prompt_tokens, prompt_ms)},
          {"predicted_n", s.n_generated},
          {"predicted_ms", predicted_ms},
          {"predicted_per_second", per_second(s.n_generated, predicted_ms)},
          {"queue_ms", r.queue_seconds * 1e3}};
}

namespace {

json base_object(const ResponseIds& ids, const char* object) {
  return {{"id", ids.id}, {"object", object}, {"created", ids.created}, {"model", ids.model},
          {"system_fingerprint", "vlkv"}};
}

bool chat(const ResponseIds& ids) { return ids.endpoint == Endpoint::kChat; }

}  // namespace

json completion_json(const ResponseIds& ids, const std::string& text, const GenerationResult& r, const json& logprobs) {
  json o = base_object(ids, chat(ids) ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_reason(r.end)}, {"logprobs", logprobs}};
  if (chat(ids)) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  o["choices"] = json::array({choice});
  o["usage"] = usage_json(r);
  o["kv"] = kv_json(r.kv);
  o["timings"] = timings_json(r);
  return o;
}

json text_chunk_json(const ResponseIds& ids, const std::string& text, bool first, bool include_usage,
                     const json& logprobs) {
  json o = base_object(ids, chat(ids) ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", nullptr}, {"logprobs", logprobs}};
  if (chat(ids)) {
    choice["delta"] = first ? json{{"role", "assistant"}, {"content", text}} : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  o["choices"] = json::array({choice});
  if (include_usage) o["usage"] = nullptr;  // OpenAI: null on every chunk but the usage one
  return o;
}

json final_chunk_json(const ResponseIds& ids, const GenerationResult& r, bool include_usage, const json& logprobs) {
  json o = base_object(ids, chat(ids) ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_reason(r.end)}, {"logprobs", logprobs}};
  if (chat(ids)) choice["delta"] = json::object();
  else choice["text"] = "";
  o["choices"] = json::array({choice});
  if (include_usage) o["usage"] = nullptr;
  o["kv"] = kv_json(r.kv);
  o["timings"] = timings_json(r);
  return o;
}

json usage_chunk_json(const ResponseIds& ids, const GenerationResult& r) {
  json o = base_object(ids, chat(ids) ? "chat.completion.chunk" : "text_completion");
  o["choices"] = json::array();
  o["usage"] = usage_json(r);
  return o;
}

std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

}  // namespace vlkv::server
