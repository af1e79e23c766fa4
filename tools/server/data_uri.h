// RFC 2397 data: URIs as OpenAI clients send images ("data:image/png;base64,iVBOR..."):
// the media type and the decoded bytes. Bounded and strict: bad input is a Status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vlkv/status.h"

namespace vlkv::server {

struct DataUri {
  std::string media_type;     // e.g. "image/png" ("" when the URI gives none)
  std::vector<uint8_t> data;  // decoded payload
};

// Standard base64 (RFC 4648 alphabet, '=' padding optional, ASCII whitespace skipped).
// InvalidArgument on any other character, misplaced padding or a truncated quantum.
Result<std::vector<uint8_t>> decode_base64(std::string_view text, size_t max_bytes);
std::string encode_base64(const uint8_t* data, size_t size);

// "data:[<media type>][;param=value]*;base64,<payload>". Only base64 payloads: images
// are binary. max_bytes bounds the decoded size (checked before decoding).
Result<DataUri> parse_data_uri(std::string_view uri, size_t max_bytes);

// An image file as a client sends it: "data:image/<type>;base64,..." (type from the
// file's extension: png, jpeg, ...). NotFound if it cannot be read.
Result<std::string> image_file_data_uri(const std::string& path);

}  // namespace vlkv::server
