// Request bodies as JSON, with their nesting capped while they are parsed: a body of nested
// '[' would otherwise grow a DOM node per byte (30 MB of them took 1.16 GB) before anything
// looked at it. The cap is far above what any request of the API nests.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "vlkv/status.h"

namespace vlkv::server {

inline constexpr int kMaxRequestJsonDepth = 64;

// InvalidArgument "the request body is not valid JSON" / "... nests deeper than 64 levels".
Result<nlohmann::json> parse_request_json(std::string_view body);

}  // namespace vlkv::server
