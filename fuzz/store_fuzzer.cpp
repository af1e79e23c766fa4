// libFuzzer target: what vlkv serve reads back from a prefix store it cannot trust - the
// authenticated entry envelope (tools/server/entry_envelope.h: trailer framing and MAC
// check) and the Redis replies our client parses itself (tools/server/resp_reply.h). Any
// crash, leak or UB is a bug; and an envelope opens only when it is a sealed one (the
// fuzzer cannot forge a MAC), a reply parsed from a prefix of the input never reads past it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/entry_envelope.h"
#include "server/resp_reply.h"

namespace {

const vlkv::server::EntrySigner& signer() {
  static const vlkv::server::EntrySigner s(std::string(32, 'k'));
  return s;
}

void check_reply(std::string_view in, uint64_t cap) {
  using vlkv::server::RespParse;
  vlkv::server::RespReply r;
  size_t used = 0, expected = 0;
  const RespParse p = vlkv::server::parse_resp_reply(in, cap, &r, &used, &expected);
  if (p == RespParse::kDone) {
    if (used == 0 || used > in.size()) std::abort();
    if ((r.type == r.kBulk || r.type == r.kStatus || r.type == r.kError) && (r.at > used || r.len > used - r.at)) std::abort();
    if (r.type == r.kBulk && r.len > cap) std::abort();
  }
  if (p == RespParse::kIncomplete && expected != 0 && expected <= in.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // Replies, whole and cut at every length up to a few hundred bytes, under a small cap.
  check_reply(in, 64);
  check_reply(in, 1 << 20);
  for (size_t n = 0; n < in.size() && n < 256; ++n) check_reply(in.substr(0, n), 64);
  // The envelope: the input as a stored value (never opens: no MAC), and sealed (opens, whole).
  std::string value(in);
  if (signer().open("vlkv:prefix:00", value)) std::abort();
  if (value != in) std::abort();
  signer().seal("vlkv:prefix:00", value);
  std::string moved = value;
  if (signer().open("vlkv:prefix:01", moved)) std::abort();
  if (!signer().open("vlkv:prefix:00", value) || value != in) std::abort();
  return 0;
}
