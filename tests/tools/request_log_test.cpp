// The per-request log line: logfmt with fixed keys, and a client's path can neither break
// the line nor forge a key.
#include "server/request_log.h"

#include <gtest/gtest.h>

namespace vlkv::server {
namespace {

TEST(RequestLog, FixedKeysInOrder) {
  RequestLog log;
  log.id = "req-1";
  log.method = "POST";
  log.path = "/v1/chat/completions";
  log.status = 200;
  log.prompt_tokens = 31;
  log.generated_tokens = 8;
  log.ttft_ms = 12.34;
  log.tokens_per_second = 45.06;
  log.kv_method = "kivi2";
  log.kv_bytes = 24576;
  const std::string line = format_request_log(log);
  EXPECT_EQ(line.rfind("vlkv serve: request id=req-1 method=POST path=/v1/chat/completions status=200 ms=", 0), 0u)
      << line;
  EXPECT_NE(line.find(" prompt_tokens=31 gen_tokens=8 ttft_ms=12.3 tok_s=45.1 kv=kivi2 kv_bytes=24576"), std::string::npos)
      << line;
}

TEST(RequestLog, HostileValuesAreQuoted) {
  RequestLog log;
  log.id = "a b";
  log.method = "GET";
  log.path = "/x\" status=200\nvlkv serve: request id=forged";
  log.status = 404;
  const std::string line = format_request_log(log);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("id=\"a b\""), std::string::npos) << line;
  EXPECT_NE(line.find("path=\"/x\\\" status=200?vlkv serve: request id=forged\""), std::string::npos) << line;
  EXPECT_NE(line.find(" kv=- "), std::string::npos) << line;  // no generation
}

}  // namespace
}  // namespace vlkv::server
