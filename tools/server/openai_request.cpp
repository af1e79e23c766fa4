#include "server/openai_request.h"

#include <climits>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "server/data_uri.h"
#include "server/request_json.h"

namespace vlkv::server {
namespace {

using nlohmann::json;

// Field readers: absent or null leaves the value as it is; a wrong type is an error.
Status read_number(const json& body, const char* key, double lo, double hi, float* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_number()) return invalid_argument(std::string("'") + key + "' must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return invalid_argument(std::string("'") + key + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  *out = static_cast<float>(v);
  return Status::ok();
}

Status read_integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_number_integer()) return invalid_argument(std::string("'") + key + "' must be an integer");
  // Unsigned values beyond int64 are out of range anyway.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    return invalid_argument(std::string("'") + key + "' must be at most " + std::to_string(hi));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return invalid_argument(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = v;
  return Status::ok();
}

Status read_bool(const json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return invalid_argument(std::string("'") + key + "' must be true or false");
  *out = it->get<bool>();
  return Status::ok();
}

// A sampling field of SamplerParams' table: its JSON type, then the row's range (check_param:
// the message vlkv run's flag gives for the same value).
Status read_param(const json& body, const ParamField& info, float* out) {
  float v = *out;
  VLKV_RETURN_IF_ERROR(read_number(body, info.json, -HUGE_VAL, HUGE_VAL, &v));
  VLKV_RETURN_IF_ERROR(check_param(info, v));
  *out = v;
  return Status::ok();
}

Status read_param(const json& body, const ParamField& info, int32_t* out) {
  int64_t v = *out;
  VLKV_RETURN_IF_ERROR(read_integer(body, info.json, INT32_MIN, INT32_MAX, &v));
  VLKV_RETURN_IF_ERROR(check_param(info, static_cast<double>(v)));
  *out = static_cast<int32_t>(v);
  return Status::ok();
}

Status read_sampling(const json& body, ApiRequest& r) {
  SamplerParams& s = r.sampling;
  // Every row but the seed (below); a field the server does not take (repeat_last_n) was
  // already refused by check_fields.
  Status st = Status::ok();
  SamplerParams::visit(s, [&](auto& field, const ParamField& info) {
    if constexpr (!std::is_same_v<std::decay_t<decltype(field)>, uint32_t>)
      if (st.is_ok()) st = read_param(body, info, &field);
  });
  VLKV_RETURN_IF_ERROR(st);
  int64_t seed = -1;  // OpenAI clients send -1 or nothing for "random"
  VLKV_RETURN_IF_ERROR(read_integer(body, "seed", -1, UINT32_MAX, &seed));
  s.seed = seed < 0 ? SamplerParams::kRandomSeed : static_cast<uint32_t>(seed);
  // Penalties we do not implement: the neutral value is accepted (clients send it by default).
  for (const char* key : {"frequency_penalty", "presence_penalty"}) {
    float v = 0;
    VLKV_RETURN_IF_ERROR(read_number(body, key, -2.0, 2.0, &v));
    if (v != 0) return invalid_argument(std::string("'") + key + "' is not supported (use repeat_penalty)");
  }
  int64_t n = 1;
  VLKV_RETURN_IF_ERROR(read_integer(body, "n", 1, 1, &n));
  return Status::ok();
}

Status read_stop(const json& body, const RequestLimits& limits, ApiRequest& r) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return Status::ok();
  if (it->is_string()) {
    if (!it->get_ref<const std::string&>().empty()) r.stop.push_back(it->get<std::string>());
    return Status::ok();
  }
  if (!it->is_array()) return invalid_argument("'stop' must be a string or an array of strings");
  if (it->size() > static_cast<size_t>(limits.max_stop))
    return invalid_argument("'stop' has more than " + std::to_string(limits.max_stop) + " strings");
  for (const json& s : *it) {
    if (!s.is_string()) return invalid_argument("'stop' must be a string or an array of strings");
    if (!s.get_ref<const std::string&>().empty()) r.stop.push_back(s.get<std::string>());
  }
  return Status::ok();
}

// An image_url or video_url part: its media read (header only) and a marker at its place.
Status add_media(const json& part, const std::string& key, const RequestLimits& limits, ApiRequest& r,
                 std::string& content) {
  const bool video = key == "video_url";
  auto iu = part.find(key);
  if (iu == part.end()) return invalid_argument("an '" + key + "' part needs an '" + key + "' object");
  std::string url;
  if (iu->is_string()) {
    url = iu->get<std::string>();
  } else if (iu->is_object() && iu->contains("url") && (*iu)["url"].is_string()) {
    url = (*iu)["url"].get<std::string>();
  } else {
    return invalid_argument("'" + key + "' must be {\"url\": \"data:" + (video ? "video" : "image") + "/...;base64,...\"}");
  }
  if (static_cast<int64_t>(r.images.size()) >= limits.max_images)
    return invalid_argument("more than " + std::to_string(limits.max_images) + " images and videos in one request");
  Result<RequestImage> m = video ? read_video_url(url, limits) : read_image_url(url, limits);
  if (!m.is_ok())
    return invalid_argument(std::string(video ? "video " : "image ") + std::to_string(r.images.size() + 1) + ": " +
                            m.status().message());
  r.images.push_back(std::move(m).value());
  if (!r.media_at.empty()) r.media_at.back().push_back(content.size());
  content += kMediaMarker;
  return Status::ok();
}

// A message's content: a string, null, or parts (text, image_url, video_url) in order; each
// image or video becomes one media marker at its place.
Status read_content(const json& content, const RequestLimits& limits, ApiRequest& r, std::string& out) {
  if (content.is_null()) return Status::ok();
  if (content.is_string()) {
    out = content.get<std::string>();
    return Status::ok();
  }
  if (!content.is_array()) return invalid_argument("'content' must be a string or an array of parts");
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return invalid_argument("each content part must be an object with a 'type'");
    const std::string& type = part["type"].get_ref<const std::string&>();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string())
        return invalid_argument("a 'text' part needs a string 'text'");
      out += part["text"].get_ref<const std::string&>();
    } else if (type == "image_url" || type == "video_url") {
      VLKV_RETURN_IF_ERROR(add_media(part, type, limits, r, out));
    } else {
      return invalid_argument("content part type '" + type + "' is not supported (text, image_url, video_url)");
    }
  }
  return Status::ok();
}

Status read_messages(const json& body, const RequestLimits& limits, ApiRequest& r) {
  auto it = body.find("messages");
  if (it == body.end()) return invalid_argument("'messages' is required");
  if (!it->is_array() || it->empty()) return invalid_argument("'messages' must be a non-empty array");
  for (const json& m : *it) {
    if (!m.is_object()) return invalid_argument("each message must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return invalid_argument("each message needs a string 'role'");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant")
      return invalid_argument("message role '" + role + "' is not supported (system, user, assistant)");
    if (!m.contains("content")) return invalid_argument("each message needs 'content'");
    ChatTurn turn{role, {}};
    r.media_at.emplace_back();
    VLKV_RETURN_IF_ERROR(read_content(m["content"], limits, r, turn.content));
    r.conversation.push_back(std::move(turn));
  }
  return Status::ok();
}

Status read_prompt(const json& body, ApiRequest& r) {
  auto it = body.find("prompt");
  if (it == body.end()) return invalid_argument("'prompt' is required");
  if (it->is_array() && it->size() == 1) it = it->begin();  // ["text"]: one prompt
  if (!it->is_string()) return invalid_argument("'prompt' must be a string");
  r.prompt = it->get<std::string>();
  return Status::ok();
}

// Chat: "logprobs" true/false and "top_logprobs" 0-20 (OpenAI's limits); completions:
// "logprobs" 0-5 (the legacy API's limit).
Status read_logprobs(const json& body, Endpoint endpoint, ApiRequest& r) {
  if (endpoint == Endpoint::kCompletion) {
    auto it = body.find("logprobs");
    if (it != body.end() && it->is_boolean() && !it->get<bool>()) return Status::ok();  // false: none
    int64_t n = -1;
    VLKV_RETURN_IF_ERROR(read_integer(body, "logprobs", 0, 5, &n));
    r.logprobs = static_cast<int32_t>(n);
    return Status::ok();
  }
  bool on = false;
  VLKV_RETURN_IF_ERROR(read_bool(body, "logprobs", &on));
  int64_t top = 0;
  VLKV_RETURN_IF_ERROR(read_integer(body, "top_logprobs", 0, 20, &top));
  if (top > 0 && !on) return invalid_argument("'top_logprobs' needs 'logprobs': true");
  if (on) r.logprobs = static_cast<int32_t>(top);
  return Status::ok();
}

// The fields a request may carry. llama-server ignores a field it does not know; a client
// that asked for logprobs or a JSON schema would then get an answer without them and not
// know it, so any other field is refused by name (implementing one moves it here).
bool known_field(const std::string& key, Endpoint endpoint) {
  static const char* const kCommon[] = {"model", "max_tokens", "max_completion_tokens", "n_predict", "temperature",
                                        "top_p", "min_p", "top_k", "repeat_penalty", "seed", "frequency_penalty",
                                        "presence_penalty", "n", "stop", "stream", "stream_options", "kv", "user",
                                        "cache_prompt", "logprobs", "response_format", "cache_salt"};
  for (const char* k : kCommon)
    if (key == k) return true;
  if (endpoint == Endpoint::kChat && key == "top_logprobs") return true;
  return key == (endpoint == Endpoint::kChat ? "messages" : "prompt");
}

// A field we do not implement, sent at the value that asks for nothing (some clients send
// "logprobs": false or "tools": [] by default).
bool neutral_value(const std::string& key, const json& v) {
  if (v.is_null()) return true;
  if (key == "echo") return (v.is_boolean() && !v.get<bool>()) || v == 0;
  if (key == "top_logprobs" || key == "n_probs" || key == "best_of") return v == 0 || (key == "best_of" && v == 1);
  if (key == "tools" || key == "functions") return v.is_array() && v.empty();
  if (key == "tool_choice") return v == "none";
  if (key == "logit_bias") return v.is_object() && v.empty();
  return false;
}

Status check_fields(const json& body, Endpoint endpoint) {
  for (const auto& [key, value] : body.items()) {
    if (known_field(key, endpoint) || neutral_value(key, value)) continue;
    std::string shown = key.substr(0, 64);
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) c = '?';
    return invalid_argument("'" + shown + "' is not supported by this server");
  }
  return Status::ok();
}

}  // namespace

Result<std::string> resolve_under(const std::string& path, const std::string& dir) {
  char* real_dir = realpath(dir.c_str(), nullptr);
  if (!real_dir) return invalid_argument("--media-path is not a directory");
  std::string root(real_dir);
  std::free(real_dir);
  char* real = realpath(path.c_str(), nullptr);
  if (!real) return invalid_argument("file not found under --media-path");
  std::string file(real);
  std::free(real);
  if (root != "/" && file.rfind(root + "/", 0) != 0) return invalid_argument("file:// URL outside --media-path");
  return file;
}

Result<RequestImage> read_image_url(const std::string& url, const RequestLimits& limits) {
  RequestImage image;
  if (url.rfind("data:", 0) == 0) {
    Result<DataUri> uri = parse_data_uri(url, limits.media.max_file_bytes);
    if (!uri.is_ok()) return uri.status();
    if (!uri->media_type.empty() && uri->media_type.rfind("image/", 0) != 0)
      return invalid_argument("data: URI of type '" + uri->media_type + "' is not an image");
    VLKV_ASSIGN_OR_RETURN(image.info, probe_image_data(uri->data.data(), uri->data.size(), limits.media));
    image.bytes = std::move(uri->data);
    return image;
  }
  if (url.rfind("file://", 0) == 0) {
    if (limits.media_path.empty()) return invalid_argument("file:// URLs are refused (start the server with --media-path DIR)");
    Result<std::string> path = resolve_under(url.substr(7), limits.media_path);
    if (!path.is_ok()) return path.status();
    VLKV_ASSIGN_OR_RETURN(image.info, probe_image(*path, limits.media));
    image.path = std::move(path).value();
    return image;
  }
  return invalid_argument("only data: URIs (and file:// under --media-path) are accepted; remote URLs are not fetched");
}

Result<Image> decode_request_image(const RequestImage& image, const RequestLimits& limits) {
  if (!image.path.empty()) return load_image(image.path, limits.media);
  return decode_image(image.bytes.data(), image.bytes.size(), limits.media);
}

Result<ApiRequest> parse_request(std::string_view body_text, Endpoint endpoint, const RequestLimits& limits) {
  VLKV_ASSIGN_OR_RETURN(json body, parse_request_json(body_text));
  if (!body.is_object()) return invalid_argument("the request body must be a JSON object");
  VLKV_RETURN_IF_ERROR(check_fields(body, endpoint));
  ApiRequest r;
  r.endpoint = endpoint;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_argument("'model' must be a string");
    r.model = it->get<std::string>();
  }
  VLKV_RETURN_IF_ERROR(endpoint == Endpoint::kChat ? read_messages(body, limits, r) : read_prompt(body, r));
  // max_completion_tokens is OpenAI's newer name; n_predict llama-server's.
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"})
    VLKV_RETURN_IF_ERROR(read_integer(body, key, key[0] == 'n' ? -1 : 0, INT32_MAX, &r.max_tokens));
  VLKV_RETURN_IF_ERROR(read_sampling(body, r));
  VLKV_RETURN_IF_ERROR(read_stop(body, limits, r));
  VLKV_RETURN_IF_ERROR(read_logprobs(body, endpoint, r));
  if (auto it = body.find("response_format"); it != body.end()) {
    VLKV_ASSIGN_OR_RETURN(r.response_format, parse_response_format(*it));
  }
  VLKV_RETURN_IF_ERROR(read_bool(body, "stream", &r.stream));
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_argument("'stream_options' must be an object");
    VLKV_RETURN_IF_ERROR(read_bool(*it, "include_usage", &r.include_usage));
  }
  bool cache_prompt = true;  // llama-server's hint; nothing to do until a prefix cache exists
  VLKV_RETURN_IF_ERROR(read_bool(body, "cache_prompt", &cache_prompt));
  if (auto it = body.find("user"); it != body.end() && !it->is_null() && !it->is_string())
    return invalid_argument("'user' must be a string");
  if (auto it = body.find("cache_salt"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxCacheSaltBytes)
      return invalid_argument("'cache_salt' must be a string of at most " + std::to_string(kMaxCacheSaltBytes) + " bytes");
    r.cache_salt = it->get<std::string>();
  }
  if (auto it = body.find("kv"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get_ref<const std::string&>().empty())
      return invalid_argument("'kv' must be a KV method name, e.g. \"kivi2\"");
    r.kv_method = it->get<std::string>();
  }
  return r;
}

}  // namespace vlkv::server
