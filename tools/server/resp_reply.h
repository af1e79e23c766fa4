// The replies vlkv serve's Redis client reads (redis_store.cpp), parsed by us so that their
// size is checked before their bytes are read: a bulk string's length is known from its
// header, and one over the caller's cap is refused then. Only the reply kinds our commands
// get (STRLEN, GETRANGE, SET, INFO) are accepted: status, error, integer, bulk string, nil.
// Anything else (arrays, attributes, garbage, a line without its CRLF in 64 KiB) is bad.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vlkv::server {

struct RespReply {
  enum Type { kStatus, kError, kInteger, kBulk, kNil } type = kNil;
  int64_t integer = 0;
  size_t at = 0, len = 0;  // the text of a status, error or bulk string: buf[at, at + len)
};

enum class RespParse {
  kDone,        // *reply filled, *used: the bytes it took
  kIncomplete,  // more bytes are needed; *expected: the reply's whole size once known (else 0)
  kBad,         // not a reply we accept
  kTooLarge,    // a bulk string over max_bulk (decided from its header)
};

RespParse parse_resp_reply(std::string_view buf, uint64_t max_bulk, RespReply* reply, size_t* used, size_t* expected);

}  // namespace vlkv::server
