// vlkv serve under load and at its edges, over real HTTP on 127.0.0.1: 64 concurrent
// clients x 4 requests all answered and well formed; a client that hangs up (mid-stream,
// waiting for a non-streamed answer, or queued) has its request cancelled and its KV
// pages freed (/metrics); SIGTERM exits 0.
#include <gtest/gtest.h>

#include <atomic>

#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

TEST(ServeLoad, SixtyFourClientsFourRequestsEach) {
  ServerProcess server({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "4", "--kv-budget", "64M",
                        "--kv-allow", "kivi2"});
  ASSERT_TRUE(server.running()) << server.log();
  const std::string image = image_data_uri(demo_image("009.png"));
  // Greedy answers per request kind, taken once alone: every loaded answer must equal them.
  auto request = [&](int kind) {
    json content = kind % 2 == 0 ? json("How many shapes are there?")
                                 : json::array({{{"type", "image_url"}, {"image_url", {{"url", image}}}},
                                                {{"type", "text"}, {"text", "How many shapes are there?"}}});
    json body = {{"messages", {{{"role", "user"}, {"content", content}}}}, {"temperature", 0}, {"max_tokens", 12}};
    if (kind >= 2) body["kv"] = "kivi2";
    return body;
  };
  std::string expected[4];
  {
    httplib::Client c = server.client();
    for (int k = 0; k < 4; ++k) {
      HttpReply r = post(c, "/v1/chat/completions", request(k).dump());
      ASSERT_EQ(r.status, 200) << r.body;
      expected[k] = r.json["choices"][0]["message"]["content"];
    }
  }
  std::atomic<int> ok{0}, lost{0}, malformed{0}, wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 64; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client c = server.client(120);
      for (int i = 0; i < 4; ++i) {
        const int kind = (t + i) % 4;
        if ((t + i) % 3 == 0) {  // a third of them stream
          json body = request(kind);
          body["stream"] = true;
          StreamReply s = post_stream(c, "/v1/chat/completions", body.dump());
          if (s.status == 0) {
            ++lost;
            ADD_FAILURE() << "stream lost: " << s.error;
          }
          else if (s.status != 200 || !s.complete) ++malformed;
          else if (stream_text(s) != expected[kind]) ++wrong;
          else ++ok;
          continue;
        }
        HttpReply r = post(c, "/v1/chat/completions", request(kind).dump());
        if (r.status == 0) {
          ++lost;
          ADD_FAILURE() << "request lost: " << r.error;
        }
        else if (r.status != 200 || !r.json.is_object() || !r.json.contains("choices")) ++malformed;
        else if (r.json["choices"][0]["message"]["content"] != expected[kind]) ++wrong;
        else ++ok;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(lost.load(), 0);
  EXPECT_EQ(malformed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ok.load(), 256);
  httplib::Client c = server.client();
  const std::string metrics = get(c, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "vlkv:requests_done_total"), 256 + 4) << metrics;
  EXPECT_EQ(metric_value(metrics, "vlkv:requests_failed_total"), 0);
  EXPECT_EQ(metric_value(metrics, "vlkv:kv_requests_total{method=\"kivi2\"}"), 128 + 2);
  EXPECT_EQ(server.stop(), 0);
}

class ServeBackends : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Backends, ServeBackends, ::testing::Values("batch", "sessions"));

TEST_P(ServeBackends, DisconnectMidStreamCancelsAndFreesKv) {
  // 20 ms per token: the stream is still generating when the client hangs up.
  ServerProcess server({"-m", stories_path(), "-t", "1", "-np", "2", "--kv-budget", "64M", "--token-delay-ms", "20",
                        "--backend", GetParam()});
  ASSERT_TRUE(server.running()) << server.log();
  httplib::Client c = server.client();
  const std::string before = get(c, "/metrics").body;
  const double kv_before = metric_value(before, "vlkv:kv_bytes_in_use{method=\"f16\"}");
  ASSERT_GE(kv_before, 0) << before;
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", 0}, {"stream", true}};
  // While it streams, its pages are in use (the most /metrics showed meanwhile).
  std::atomic<bool> streaming{true};
  double kv_during = -1;
  std::thread poller([&] {
    httplib::Client pc = server.client();
    while (streaming) {
      kv_during = std::max(kv_during, metric_value(get(pc, "/metrics").body, "vlkv:kv_bytes_in_use{method=\"f16\"}"));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  StreamReply s;
  {
    httplib::Client sc = server.client();
    s = post_stream(sc, "/v1/completions", body.dump(), /*stop_after=*/5);
  }
  streaming = false;
  poller.join();
  EXPECT_EQ(s.status, 200);
  EXPECT_FALSE(s.complete);
  // Cancelled within a token or two; then the pages are back to what they were.
  std::string after;
  for (int i = 0; i < 200; ++i) {
    after = get(c, "/metrics").body;
    if (metric_value(after, "vlkv:requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(metric_value(after, "vlkv:requests_running"), 0) << after;
  EXPECT_EQ(metric_value(after, "vlkv:kv_bytes_in_use{method=\"f16\"}"), kv_before) << after;
  EXPECT_EQ(metric_value(after, "vlkv:requests_disconnected_total"), 1) << after;
  // It stopped early: far fewer than 400 tokens were generated.
  EXPECT_LT(metric_value(after, "vlkv:tokens_predicted_total"), 100) << after;
  EXPECT_GT(kv_during, kv_before);
  // And the server still answers.
  HttpReply r = post(c, "/v1/completions", json({{"prompt", "Once"}, {"max_tokens", 3}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(server.stop(), 0);
}

// Polls /metrics until pred holds (or ~4 s): the last text read.
template <class Pred>
std::string metrics_when(httplib::Client& c, Pred pred) {
  std::string m;
  for (int i = 0; i < 400; ++i) {
    m = get(c, "/metrics").body;
    if (pred(m)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return m;
}

TEST_P(ServeBackends, DisconnectWhileANonStreamedAnswerGeneratesCancelsIt) {
  // 400 tokens x 20 ms = 8 s; the client gives up after its 1 s read timeout.
  ServerProcess server({"-m", stories_path(), "-t", "1", "-np", "2", "--kv-budget", "64M", "--token-delay-ms", "20",
                        "--backend", GetParam()});
  ASSERT_TRUE(server.running()) << server.log();
  httplib::Client c = server.client();
  const double kv_before = metric_value(get(c, "/metrics").body, "vlkv:kv_bytes_in_use{method=\"f16\"}");
  {
    httplib::Client impatient = server.client(/*read_timeout_s=*/1);
    HttpReply r = post(impatient, "/v1/completions",
                       json({{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", 0}}).dump());
    EXPECT_EQ(r.status, 0) << "expected a read timeout, got " << r.body;
  }
  const std::string after = metrics_when(c, [](const std::string& m) {
    return metric_value(m, "vlkv:requests_running") == 0 && metric_value(m, "vlkv:requests_disconnected_total") == 1;
  });
  EXPECT_EQ(metric_value(after, "vlkv:requests_running"), 0) << after;
  EXPECT_EQ(metric_value(after, "vlkv:requests_disconnected_total"), 1) << after;
  EXPECT_EQ(metric_value(after, "vlkv:kv_bytes_in_use{method=\"f16\"}"), kv_before) << after;
  // Cancelled about when the client left (~50 tokens in), not after 400.
  EXPECT_LT(metric_value(after, "vlkv:tokens_predicted_total"), 200) << after;
  HttpReply r = post(c, "/v1/completions", json({{"prompt", "Once"}, {"max_tokens", 3}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(server.stop(), 0);
}

TEST_P(ServeBackends, DisconnectWhileQueuedLeavesTheQueue) {
  // One slot: a 2 s answer holds it while a second request waits behind it.
  ServerProcess server({"-m", stories_path(), "-t", "1", "-np", "1", "--kv-budget", "64M", "--token-delay-ms", "20",
                        "--backend", GetParam()});
  ASSERT_TRUE(server.running()) << server.log();
  HttpReply first;
  std::thread holder([&] {
    httplib::Client hc = server.client();
    first = post(hc, "/v1/completions", json({{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"temperature", 0}}).dump());
  });
  httplib::Client c = server.client();
  metrics_when(c, [](const std::string& m) { return metric_value(m, "vlkv:requests_running") == 1; });
  {
    httplib::Client impatient = server.client(/*read_timeout_s=*/1);
    HttpReply r = post(impatient, "/v1/completions", json({{"prompt", "Once"}, {"max_tokens", 5}}).dump());
    EXPECT_EQ(r.status, 0) << "expected a read timeout, got " << r.body;
  }
  // It left the queue while the first still generates.
  const std::string during = metrics_when(c, [](const std::string& m) {
    return metric_value(m, "vlkv:requests_disconnected_total") == 1 && metric_value(m, "vlkv:requests_queued") == 0;
  });
  EXPECT_EQ(metric_value(during, "vlkv:requests_disconnected_total"), 1) << during;
  EXPECT_EQ(metric_value(during, "vlkv:requests_queued"), 0) << during;
  EXPECT_EQ(metric_value(during, "vlkv:requests_running"), 1) << during;
  holder.join();
  EXPECT_EQ(first.status, 200) << first.body;
  const std::string after = get(c, "/metrics").body;
  EXPECT_EQ(metric_value(after, "vlkv:requests_done_total"), 1) << after;
  EXPECT_EQ(server.stop(), 0);
}

TEST_P(ServeBackends, SigtermDuringAStreamExitsCleanly) {
  ServerProcess server({"-m", stories_path(), "-t", "1", "--kv-budget", "64M", "--token-delay-ms", "10", "--backend",
                        GetParam()});
  ASSERT_TRUE(server.running()) << server.log();
  StreamReply s;
  std::thread client([&] {
    httplib::Client c = server.client();
    s = post_stream(c, "/v1/completions",
                    json({{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"temperature", 0}, {"stream", true}}).dump());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8));
  client.join();
  // The running stream was allowed to finish (100 tokens x 10 ms < the 3 s grace).
  EXPECT_EQ(s.status, 200);
  EXPECT_TRUE(s.complete);
  EXPECT_NE(server.log().find("stopped"), std::string::npos);
  // SIGINT likewise, idle.
  ServerProcess idle({"-m", stories_path(), "-t", "1", "--kv-budget", "64M"});
  ASSERT_TRUE(idle.running()) << idle.log();
  EXPECT_EQ(idle.stop(SIGINT), 0);
}

}  // namespace
}  // namespace vlkv
