#include "server/request_json.h"

namespace vlkv::server {
namespace {

struct TooDeep {};  // thrown by the parser's callback: parsing stops at the first level too deep

}  // namespace

Result<nlohmann::json> parse_request_json(std::string_view body) {
  using nlohmann::json;
  auto cap = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxRequestJsonDepth)
      throw TooDeep{};
    return true;
  };
  json j;
  try {
    j = json::parse(body, cap, /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    return invalid_argument("the request body nests deeper than " + std::to_string(kMaxRequestJsonDepth) + " levels");
  }
  if (j.is_discarded()) return invalid_argument("the request body is not valid JSON");
  return j;
}

}  // namespace vlkv::server
