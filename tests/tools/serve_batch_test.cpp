// vlkv serve on the batched scheduler (--backend batch, the default for text models):
// greedy answers equal vlkv run's, per-request KV methods in one pool, many concurrent
// clients, and images refused with a clear 400.
#include <gtest/gtest.h>

#include <atomic>

#include "cli_util.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

std::string run_answer(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "-m", stories_path(), "-t", "1", "-q", "--temp", "0", "-n", "24"};
  args.insert(args.end(), extra.begin(), extra.end());
  testing_cli::CliResult r = testing_cli::run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  return r.out;
}

TEST(ServeBatch, AnswersEqualRunAndKvMethodsShareOnePool) {
  ServerProcess server({"-m", stories_path(), "-t", "1", "-np", "8", "--backend", "batch", "--kv-allow", "kivi2,int4",
                        "--kv-budget", "64M"});
  ASSERT_TRUE(server.running()) << server.log();
  EXPECT_NE(server.log().find("batch backend"), std::string::npos) << server.log();
  httplib::Client c = server.client();
  for (const char* method : {"f16", "kivi2", "int4"}) {
    json body = {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 24}, {"kv", method}};
    HttpReply r = post(c, "/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json["choices"][0]["text"], run_answer({"--kv", method, "-p", "Once upon a time"})) << method;
    EXPECT_EQ(r.json["kv"]["method"], method);
    EXPECT_EQ(r.json["usage"]["completion_tokens"], 24);
    EXPECT_EQ(r.json["choices"][0]["finish_reason"], "length");
    body["stream"] = true;
    EXPECT_EQ(stream_text(post_stream(c, "/v1/completions", body.dump())), r.json["choices"][0]["text"]) << method;
  }
  // Chat: the model's template (none for stories260K: the message as given), as vlkv run --chat.
  json chat = {{"messages", {{{"role", "user"}, {"content", "Lily and Ben"}}}}, {"temperature", 0}, {"max_tokens", 24}};
  HttpReply r = post(c, "/v1/chat/completions", chat.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["choices"][0]["message"]["content"], run_answer({"--chat", "-p", "Lily and Ben"}));
  // Images need the session backend: a 400 that says so.
  json image = {{"messages",
                 {{{"role", "user"},
                   {"content", {{{"type", "image_url"}, {"image_url", {{"url", image_data_uri(demo_image("005.png"))}}}}}}}}}};
  HttpReply refused = post(c, "/v1/chat/completions", image.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.json["error"]["type"], "invalid_request_error");

  // 32 clients x 3 requests, mixed methods, in one batch: every answer equals its solo answer.
  std::string expected[3];
  const char* methods[3] = {"f16", "kivi2", "int4"};
  for (int m = 0; m < 3; ++m)
    expected[m] = post(c, "/v1/completions", json({{"prompt", "The cat"}, {"temperature", 0}, {"max_tokens", 16},
                                                   {"kv", methods[m]}}).dump()).json["choices"][0]["text"];
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 32; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client cc = server.client(120);
      for (int i = 0; i < 3; ++i) {
        const int m = (t + i) % 3;
        HttpReply rr = post(cc, "/v1/completions", json({{"prompt", "The cat"}, {"temperature", 0}, {"max_tokens", 16},
                                                         {"kv", methods[m]}}).dump());
        if (rr.status == 200 && rr.json["choices"][0]["text"] == expected[m]) ++ok;
        else ++bad;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), 96);
  EXPECT_EQ(bad.load(), 0);
  const std::string metrics = get(c, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "vlkv:requests_running"), 0) << metrics;
  EXPECT_EQ(metric_value(metrics, "vlkv:kv_bytes_in_use{method=\"all\"}"), 0) << metrics;
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace vlkv
