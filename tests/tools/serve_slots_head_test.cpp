// GET /slots (llama-server's: per slot id, is_processing, n_ctx, the request's params and
// tokens so far; behind --api-key) and HEAD on any path (RFC 9110: the GET's head, no body;
// 405 where GET is not allowed; refusals without a body).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "serve_raw.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

class ServeSlotsHead : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"-m", stories_path(), "-t", "1", "-np", "2", "--kv-budget", "16M", "--api-key",
                                 "secret", "--token-delay-ms", "40", "--allowed-hosts", "x"});  // raw "Host: x"
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override { ASSERT_TRUE(server_->running()) << server_->log(); }
  static httplib::Headers auth() { return {{"Authorization", "Bearer secret"}}; }
  // The raw bytes of the replies to `requests` (pipelined on one connection; the last one
  // should say Connection: close).
  static std::string raw(const std::string& requests) {
    RawConnection c(server_->port());
    EXPECT_TRUE(c.ok());
    EXPECT_TRUE(c.send(requests));
    return c.read_all(5000);
  }
  static ServerProcess* server_;
};
ServerProcess* ServeSlotsHead::server_ = nullptr;

TEST_F(ServeSlotsHead, SlotsIdleAndBusy) {
  httplib::Client c = server_->client();
  EXPECT_EQ(get(c, "/slots").status, 401);
  HttpReply idle = get(c, "/slots", auth());
  ASSERT_EQ(idle.status, 200) << idle.body;
  ASSERT_TRUE(idle.json.is_array());
  ASSERT_EQ(idle.json.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(idle.json[i]["id"], i);
    EXPECT_EQ(idle.json[i]["is_processing"], false);
    EXPECT_GT(idle.json[i]["n_ctx"].get<int64_t>(), 0);
  }
  // A slow stream (40 ms a token): /slots shows it with its parameters and its tokens so far.
  std::atomic<bool> done{false};
  std::thread t([&] {
    httplib::Client s = server_->client();
    s.set_default_headers(auth());
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"temperature", 0.5}, {"top_k", 7},
                       {"seed", 3}, {"stream", true}};
    post_stream(s, "/v1/completions", body.dump());
    done = true;
  });
  json busy;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done && std::chrono::steady_clock::now() < until) {
    HttpReply r = get(c, "/slots", auth());
    ASSERT_EQ(r.status, 200);
    if (r.json[0]["is_processing"] == true && r.json[0]["next_token"][0]["n_decoded"].get<int64_t>() >= 3) {
      busy = r.json;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  t.join();
  ASSERT_FALSE(busy.is_null()) << "the request never showed in /slots";
  const json& s = busy[0];
  EXPECT_EQ(s["params"]["n_predict"], 60);
  EXPECT_NEAR(s["params"]["temperature"].get<double>(), 0.5, 1e-6);
  EXPECT_EQ(s["params"]["top_k"], 7);
  EXPECT_EQ(s["params"]["seed"], 3);
  EXPECT_EQ(s["next_token"][0]["n_remain"].get<int64_t>() + s["next_token"][0]["n_decoded"].get<int64_t>(), 60);
  EXPECT_EQ(busy[1]["is_processing"], false);
  // Done: idle again.
  HttpReply after = get(c, "/slots", auth());
  EXPECT_EQ(after.json[0]["is_processing"], false) << after.body;
}

TEST_F(ServeSlotsHead, HeadIsGetWithoutBody) {
  // /health: the GET's head, Content-Length included, then straight to the next reply.
  const std::string out = raw(
      "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const size_t head_end = out.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << out;
  EXPECT_EQ(out.rfind("HTTP/1.1 200", 0), 0u) << out;
  const size_t cl = out.find("Content-Length: ");
  ASSERT_LT(cl, head_end) << out;
  const size_t length = std::strtoul(out.c_str() + cl + 16, nullptr, 10);
  EXPECT_GT(length, 0u);
  EXPECT_EQ(out.compare(head_end + 4, 12, "HTTP/1.1 200"), 0) << "a body followed the HEAD reply:\n" << out;
  const size_t second = out.find("\r\n\r\n", head_end + 4);
  ASSERT_NE(second, std::string::npos);
  EXPECT_EQ(out.size() - (second + 4), length) << out;  // the GET's body has the length HEAD announced
  // Behind the key: 200 with it, 401 without, neither with a body.
  httplib::Client c = server_->client();
  auto models = c.Head("/v1/models", auth());
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_TRUE(models->body.empty());
  const std::string refused = raw("HEAD /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(refused.rfind("HTTP/1.1 401", 0), 0u) << refused;
  EXPECT_EQ(refused.size(), refused.find("\r\n\r\n") + 4) << refused;
  const std::string missing = raw("HEAD /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(missing.rfind("HTTP/1.1 404", 0), 0u) << missing;
  EXPECT_EQ(missing.size(), missing.find("\r\n\r\n") + 4) << missing;
  // A POST-only route: 405 naming what is allowed, no body.
  const std::string post_only = raw(
      "HEAD /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(post_only.rfind("HTTP/1.1 405", 0), 0u) << post_only;
  EXPECT_NE(post_only.find("Allow: POST, OPTIONS"), std::string::npos) << post_only;
  EXPECT_EQ(post_only.size(), post_only.find("\r\n\r\n") + 4) << post_only;
  // The page's head too (no key needed).
  auto page = c.Head("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
}

}  // namespace
}  // namespace vlkv
