// parse_resp_reply (tools/server/resp_reply.h): the replies our Redis commands get, whole or
// in part; a bulk string over the cap refused from its header; other kinds refused.
#include "server/resp_reply.h"

#include <gtest/gtest.h>

#include <string>

namespace vlkv::server {
namespace {

RespParse parse(const std::string& s, RespReply* r, size_t* used = nullptr, size_t* expected = nullptr, uint64_t cap = 100) {
  size_t u = 0, e = 0;
  const RespParse p = parse_resp_reply(s, cap, r, &u, &e);
  if (used) *used = u;
  if (expected) *expected = e;
  return p;
}

TEST(RespReply, ParsesTheKindsOurCommandsGet) {
  RespReply r;
  size_t used = 0;
  ASSERT_EQ(parse("+OK\r\n", &r, &used), RespParse::kDone);
  EXPECT_EQ(r.type, RespReply::kStatus);
  EXPECT_EQ(used, 5u);
  ASSERT_EQ(parse("-ERR no\r\n", &r), RespParse::kDone);
  EXPECT_EQ(r.type, RespReply::kError);
  EXPECT_EQ(r.len, 6u);
  ASSERT_EQ(parse(":-42\r\n", &r), RespParse::kDone);
  EXPECT_EQ(r.integer, -42);
  ASSERT_EQ(parse("$-1\r\n", &r), RespParse::kDone);
  EXPECT_EQ(r.type, RespReply::kNil);
  const std::string bulk = "$5\r\nhello\r\n";
  ASSERT_EQ(parse(bulk, &r, &used), RespParse::kDone);
  EXPECT_EQ(r.type, RespReply::kBulk);
  EXPECT_EQ(bulk.substr(r.at, r.len), "hello");
  EXPECT_EQ(used, bulk.size());
}

TEST(RespReply, WantsTheRestOfAPartialReply) {
  RespReply r;
  size_t expected = 0;
  EXPECT_EQ(parse(":12", &r), RespParse::kIncomplete);
  EXPECT_EQ(parse("$5\r\nhel", &r, nullptr, &expected), RespParse::kIncomplete);
  EXPECT_EQ(expected, 11u);
}

TEST(RespReply, RefusesOversizedAndOtherKinds) {
  RespReply r;
  EXPECT_EQ(parse("$101\r\n", &r), RespParse::kTooLarge);  // decided before any of its bytes
  EXPECT_EQ(parse("$99999999999999999999\r\n", &r), RespParse::kBad);
  EXPECT_EQ(parse("$-2\r\n", &r), RespParse::kBad);
  EXPECT_EQ(parse("*2\r\n$1\r\na\r\n$1\r\nb\r\n", &r), RespParse::kBad);
  EXPECT_EQ(parse(":12a\r\n", &r), RespParse::kBad);
  EXPECT_EQ(parse("$2\r\nabcd", &r), RespParse::kBad);  // no CRLF after the body
  EXPECT_EQ(parse("+" + std::string(70000, 'x'), &r), RespParse::kBad);  // a line without end
}

}  // namespace
}  // namespace vlkv::server
