#include "server/server_info.h"

#include "param_json.h"
#include "server/request_json.h"

namespace vlkv::server {

using nlohmann::json;

namespace {

// The body as a JSON object whose keys are all in allowed (a key we would ignore is refused).
Result<json> parse_object(std::string_view body, std::initializer_list<const char*> allowed) {
  VLKV_ASSIGN_OR_RETURN(json j, parse_request_json(body));
  if (!j.is_object()) return invalid_argument("the request body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) return invalid_argument("'" + key + "' is not supported");
  }
  return j;
}

Status read_flag(const json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return invalid_argument(std::string("'") + key + "' must be true or false");
  *out = it->get<bool>();
  return Status::ok();
}

}  // namespace

json model_json(const ServedModel& m, const GenerationBackend* backend) {
  json j = {{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", "vlkv"}};
  if (backend) {
    const Engine& e = backend->model();
    j["meta"] = {{"n_ctx", e.params().n_ctx}, {"n_params_bytes", e.info().weight_bytes},
                 {"vision", e.has_vision()}, {"kv_methods", backend->kv_methods()}};
  }
  return j;
}

json props_json(const ServedModel& m, const GenerationBackend& backend) {
  const Engine& e = backend.model();
  const BackendLoad load = backend.load();
  json methods = json::array();
  json bits = json::object();  // per allowed method (the batch backend's pool is one "methods" entry)
  for (const std::string& name : backend.kv_methods()) bits[name] = backend.kv_bits_per_element(name);
  uint64_t budget = 0, in_use = 0;
  for (const KvMethodLoad& k : load.kv) {
    methods.push_back({{"name", k.method}, {"bits_per_element", k.bits_per_element},
                       {"bytes_in_use", k.bytes_in_use}, {"budget_bytes", k.budget_bytes}});
    budget = load.one_pool ? k.budget_bytes : budget + k.budget_bytes;  // one shared pool counts once
    in_use += k.bytes_in_use;
  }
  return {{"model", m.id},
          {"model_path", m.path},
          {"created", m.created},
          {"n_ctx", e.params().n_ctx},
          {"total_slots", m.n_slots},
          {"api_key_required", m.api_key_required},
          {"modalities", {{"vision", e.has_vision()}, {"audio", false}}},
          {"default_generation_settings", {{"n_ctx", e.params().n_ctx}, {"params", params_to_json(SamplerParams{})}}},
          {"engine_params", params_to_json(e.params())},
          {"kv", {{"default", backend.kv_methods().front()},
                  {"allowed", backend.kv_methods()},
                  {"bits_per_element", bits},
                  {"methods", methods},
                  {"budget_bytes", budget},
                  {"bytes_in_use", in_use}}},
          {"running", load.running},
          {"queued", load.queued},
          {"build_info", "vlkv"}};
}

Result<json> tokenize_json(std::string_view body, const Engine& model) {
  Result<json> j = parse_object(body, {"content", "add_special", "parse_special", "with_pieces"});
  if (!j.is_ok()) return j.status();
  auto it = j->find("content");
  if (it == j->end() || !it->is_string()) return invalid_argument("'content' must be a string");
  bool add_special = false, parse_special = true, with_pieces = false;  // llama-server's defaults
  VLKV_RETURN_IF_ERROR(read_flag(*j, "add_special", &add_special));
  VLKV_RETURN_IF_ERROR(read_flag(*j, "parse_special", &parse_special));
  VLKV_RETURN_IF_ERROR(read_flag(*j, "with_pieces", &with_pieces));
  const std::vector<int32_t> ids = model.tokenize(it->get<std::string>(), add_special, parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces) tokens.push_back({{"id", id}, {"piece", model.token_to_piece(id)}});
    else tokens.push_back(id);
  }
  return json{{"tokens", std::move(tokens)}};
}

Result<json> detokenize_json(std::string_view body, const Engine& model) {
  Result<json> j = parse_object(body, {"tokens"});
  if (!j.is_ok()) return j.status();
  auto it = j->find("tokens");
  if (it == j->end() || !it->is_array()) return invalid_argument("'tokens' must be an array of token ids");
  const int64_t n_vocab = model.info().n_vocab;
  std::string content;
  for (const json& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
      return invalid_argument("'tokens' must hold token ids in [0, " + std::to_string(n_vocab) + ")");
    content += model.token_to_piece(static_cast<int32_t>(t.get<int64_t>()));
  }
  return json{{"content", std::move(content)}};
}

}  // namespace vlkv::server
