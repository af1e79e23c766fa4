// The server's error responses, shaped as llama-server sends them:
// {"error":{"code":N,"message":"...","type":"..."}} with llama-server's type names.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace vlkv::server {

struct ApiError {
  int code = 500;
  std::string type = "server_error";
  std::string message;
};

inline ApiError bad_request(std::string message) { return {400, "invalid_request_error", std::move(message)}; }
inline ApiError unauthorized(std::string message) { return {401, "authentication_error", std::move(message)}; }
inline ApiError not_found_error(std::string message) { return {404, "not_found_error", std::move(message)}; }
inline ApiError too_large(std::string message) { return {413, "invalid_request_error", std::move(message)}; }
inline ApiError unavailable(std::string message) { return {503, "unavailable_error", std::move(message)}; }
inline ApiError server_error(std::string message) { return {500, "server_error", std::move(message)}; }

inline nlohmann::json error_json(const ApiError& e) {
  return {{"error", {{"code", e.code}, {"message", e.message}, {"type", e.type}}}};
}

// JSON text for the wire: invalid UTF-8 (a token cut inside a character) becomes U+FFFD
// instead of an exception.
inline std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace vlkv::server
