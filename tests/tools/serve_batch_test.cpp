// vlkv serve on the batched scheduler (--backend batch, the default):
// greedy answers equal vlkv run's, per-request KV methods in one pool, many concurrent
// clients, and image requests on the bundled VLM batched with the same answers as vlkv run.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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
  for (const char* m : methods)  // one gauge per method (issue 40: not one "all" for the pool), none held now
    EXPECT_EQ(metric_value(metrics, std::string("vlkv:kv_bytes_in_use{method=\"") + m + "\"}"), 0) << metrics;
  EXPECT_EQ(server.stop(), 0);
}

// Image chat through the scheduler: prompts built as vlkv run --image builds them, image
// embeddings fed through the batched decoder, two different pictures decoding together.
TEST(ServeBatch, ImageRequestsEqualRun) {
  ServerProcess server({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "4", "--backend", "batch",
                        "--kv-budget", "64M"});
  ASSERT_TRUE(server.running()) << server.log();
  EXPECT_NE(server.log().find("batch backend"), std::string::npos) << server.log();
  const std::pair<const char*, const char*> asks[] = {{"005.png", "Where is the blue circle?"},
                                                      {"009.png", "Describe the image."}};
  std::string answers[2];
  std::vector<std::thread> clients;
  for (int i = 0; i < 2; ++i)
    clients.emplace_back([&, i] {
      httplib::Client c = server.client();
      json body = {{"messages",
                    {{{"role", "user"},
                      {"content",
                       {{{"type", "image_url"}, {"image_url", {{"url", image_data_uri(demo_image(asks[i].first))}}}},
                        {{"type", "text"}, {"text", asks[i].second}}}}}}},
                   {"temperature", 0},
                   {"max_tokens", 24}};
      HttpReply r = post(c, "/v1/chat/completions", body.dump());
      EXPECT_EQ(r.status, 200) << r.body;
      if (r.status == 200) answers[i] = r.json["choices"][0]["message"]["content"];
    });
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 2; ++i) {
    testing_cli::CliResult run = testing_cli::run_cli({"run", "-m", model_path(), "--mmproj", mmproj_path(), "-t", "1",
                                                       "-q", "--temp", "0", "-n", "24", "--image",
                                                       demo_image(asks[i].first), "-p", asks[i].second});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    if (!run.out.empty() && run.out.back() == '\n') run.out.pop_back();
    EXPECT_FALSE(answers[i].empty());
    EXPECT_EQ(answers[i], run.out) << asks[i].first;
  }
}

}  // namespace
}  // namespace vlkv
