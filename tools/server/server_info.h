// The bodies of vlkv serve's informational routes, shaped as llama-server's: /v1/models
// and /v1/models/{id} (OpenAI's model object), /props, and /tokenize and /detokenize.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/generation_backend.h"
#include "vlkv/status.h"

namespace vlkv::server {

struct ServedModel {
  std::string id;          // the name in /v1/models and responses (--alias or the file's stem)
  std::string path;        // the model file
  int64_t created = 0;     // Unix seconds: when the server started
  int n_slots = 0;         // requests generating at once
  bool api_key_required = false;  // --api-key given: the page shows its key box only then
};

// One OpenAI model object; backend null while loading (no "meta").
nlohmann::json model_json(const ServedModel& m, const GenerationBackend* backend);
// Model, context, vision, slots, whether a key is required, and the KV methods with their
// budgets and bytes in use.
nlohmann::json props_json(const ServedModel& m, const GenerationBackend& backend);

// {"content": "...", "add_special": false, "parse_special": true, "with_pieces": false}
// → {"tokens": [...]}; with_pieces: [{"id": N, "piece": "..."}]. InvalidArgument names the field.
Result<nlohmann::json> tokenize_json(std::string_view body, const Engine& model);
// {"tokens": [...]} → {"content": "..."}; ids outside the vocabulary are refused.
Result<nlohmann::json> detokenize_json(std::string_view body, const Engine& model);

}  // namespace vlkv::server
