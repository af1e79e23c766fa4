#include "server/resp_reply.h"

namespace vlkv::server {
namespace {

constexpr size_t kMaxLine = 64 << 10;

// A decimal integer that is the whole of s ("-" allowed, at most 18 digits: no overflow).
bool parse_integer(std::string_view s, int64_t* out) {
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = negative ? -v : v;
  return true;
}

}  // namespace

RespParse parse_resp_reply(std::string_view buf, uint64_t max_bulk, RespReply* reply, size_t* used, size_t* expected) {
  *expected = 0;
  if (buf.empty()) return RespParse::kIncomplete;
  const size_t eol = buf.find("\r\n");
  if (eol == std::string_view::npos) return buf.size() > kMaxLine ? RespParse::kBad : RespParse::kIncomplete;
  if (eol > kMaxLine) return RespParse::kBad;
  const std::string_view line = buf.substr(1, eol - 1);
  switch (buf[0]) {
    case '+':
    case '-':
      reply->type = buf[0] == '+' ? RespReply::kStatus : RespReply::kError;
      reply->at = 1;
      reply->len = line.size();
      *used = eol + 2;
      return RespParse::kDone;
    case ':':
      if (!parse_integer(line, &reply->integer)) return RespParse::kBad;
      reply->type = RespReply::kInteger;
      *used = eol + 2;
      return RespParse::kDone;
    case '$': {
      int64_t n = 0;
      if (!parse_integer(line, &n) || n < -1) return RespParse::kBad;
      if (n == -1) {
        reply->type = RespReply::kNil;
        *used = eol + 2;
        return RespParse::kDone;
      }
      if (static_cast<uint64_t>(n) > max_bulk) return RespParse::kTooLarge;
      const size_t total = eol + 2 + static_cast<size_t>(n) + 2;
      if (buf.size() < total) {
        *expected = total;
        return RespParse::kIncomplete;
      }
      if (buf.substr(total - 2, 2) != "\r\n") return RespParse::kBad;
      reply->type = RespReply::kBulk;
      reply->at = eol + 2;
      reply->len = static_cast<size_t>(n);
      *used = total;
      return RespParse::kDone;
    }
    default:
      return RespParse::kBad;
  }
}

}  // namespace vlkv::server
