// vlkv serve's prefix cache (--cache-budget, docs/prefix_cache.md): an OpenAI-style
// conversation about an image, resent whole every turn, answers as a server without the
// cache does, reports usage.prompt_tokens_details.cached_tokens and the cache's counters
// in /metrics; a client that hangs up mid-answer frees its pages but not the entries.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "serve_util.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

json image_part(const char* name) {
  return {{"type", "image_url"}, {"image_url", {{"url", image_data_uri(demo_image(name))}}}};
}

struct Turn {
  std::string answer;
  int64_t cached = -1;
  int64_t prompt = 0;
};

// Three turns about one picture, each request carrying the image and every earlier turn.
std::vector<Turn> conversation(httplib::Client& c, const std::string& kv) {
  const char* questions[] = {"Describe the image.", "Where is the shape?", "What colour is it?"};
  json messages = json::array();
  std::vector<Turn> turns;
  for (int t = 0; t < 3; ++t) {
    json content = json::array();
    if (t == 0) content.push_back(image_part("005.png"));
    content.push_back({{"type", "text"}, {"text", questions[t]}});
    messages.push_back({{"role", "user"}, {"content", content}});
    json body = {{"messages", messages}, {"temperature", 0}, {"max_tokens", 16}, {"kv", kv}};
    HttpReply r = post(c, "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return turns;
    Turn turn;
    turn.answer = r.json["choices"][0]["message"]["content"];
    turn.cached = r.json["usage"]["prompt_tokens_details"]["cached_tokens"];
    turn.prompt = r.json["usage"]["prompt_tokens"];
    turns.push_back(turn);
    messages.push_back({{"role", "assistant"}, {"content", turn.answer}});
  }
  return turns;
}

TEST(ServePrefixCache, ConversationAnswersAsWithoutCacheAndReportsCachedTokens) {
  const std::vector<std::string> common = {"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "2",
                                           "--backend", "batch", "--kv-allow", "kivi2", "--kv-budget", "64M"};
  std::vector<std::string> with = common, without = common;
  with.insert(with.end(), {"--cache-budget", "32M"});
  without.insert(without.end(), {"--cache-budget", "0"});
  ServerProcess cached(with), plain(without);
  ASSERT_TRUE(cached.running()) << cached.log();
  ASSERT_TRUE(plain.running()) << plain.log();
  httplib::Client cc = cached.client(), pc = plain.client();
  for (const char* kv : {"f16", "kivi2"}) {
    const std::vector<Turn> got = conversation(cc, kv), want = conversation(pc, kv);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_EQ(want.size(), 3u);
    for (size_t t = 0; t < 3; ++t) {
      EXPECT_EQ(got[t].answer, want[t].answer) << kv << ", turn " << t + 1;
      EXPECT_EQ(got[t].prompt, want[t].prompt);
      EXPECT_EQ(want[t].cached, 0);
    }
    EXPECT_EQ(got[0].cached, 0) << kv;
    EXPECT_GT(got[1].cached, 0) << kv;  // the image and the text before it
    EXPECT_GE(got[2].cached, got[1].cached) << kv;
    EXPECT_LT(got[2].cached, got[2].prompt);
  }
  const std::string m = get(cc, "/metrics").body;
  EXPECT_GT(metric_value(m, "vlkv:prefix_cache_bytes"), 0) << m;
  EXPECT_EQ(metric_value(m, "vlkv:prefix_cache_budget_bytes"), 32 << 20) << m;
  EXPECT_EQ(metric_value(m, "vlkv:prefix_cache_hits_total{method=\"f16\"}"), 2) << m;
  EXPECT_EQ(metric_value(m, "vlkv:prefix_cache_misses_total{method=\"f16\"}"), 1) << m;
  EXPECT_GT(metric_value(m, "vlkv:prefix_cache_method_bytes{method=\"f16\"}"), 0) << m;
  EXPECT_GT(metric_value(m, "vlkv:prefix_cache_cached_tokens_total{method=\"f16\"}"), 0) << m;
  // The encoder ran once for six requests carrying the same picture.
  // Turn 1 looked the picture up twice: laid out unencoded, then encoded (nothing covered it).
  EXPECT_EQ(metric_value(m, "vlkv:media_cache_misses_total"), 2) << m;
  EXPECT_EQ(metric_value(m, "vlkv:media_cache_hits_total"), 5) << m;
  EXPECT_EQ(metric_value(m, "vlkv:media_encodes_total"), 1) << m;
  EXPECT_EQ(metric_value(m, "vlkv:kv_bytes_in_use{method=\"f16\"}"), 0) << m;  // no request holds pages
  EXPECT_EQ(metric_value(m, "vlkv:kv_bytes_in_use{method=\"kivi2\"}"), 0) << m;
  EXPECT_EQ(metric_value(get(pc, "/metrics").body, "vlkv:prefix_cache_bytes"), 0);
  EXPECT_EQ(cached.stop(), 0);
  EXPECT_EQ(plain.stop(), 0);
}

TEST(ServePrefixCache, ClientHangingUpFreesItsPagesNotTheEntries) {
  ServerProcess server({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "2", "--backend", "batch",
                        "--kv-budget", "64M", "--cache-budget", "32M", "--token-delay-ms", "100"});
  ASSERT_TRUE(server.running()) << server.log();
  httplib::Client c = server.client();
  json body = {{"messages", {{{"role", "user"}, {"content", {image_part("009.png"), {{"type", "text"}, {"text", "Describe the image."}}}}}}},
               {"temperature", 0},
               {"max_tokens", 200},
               {"stream", true}};
  StreamReply r = post_stream(c, "/v1/chat/completions", body.dump(), /*stop_after=*/3);  // then hangs up
  EXPECT_FALSE(r.complete);
  std::string m;
  for (int i = 0; i < 200; ++i) {  // the server notices at its next write
    m = get(c, "/metrics").body;
    if (metric_value(m, "vlkv:requests_running") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(metric_value(m, "vlkv:requests_running"), 0) << m;
  EXPECT_EQ(metric_value(m, "vlkv:requests_disconnected_total"), 1) << m;  // it did hang up mid-answer
  EXPECT_EQ(metric_value(m, "vlkv:kv_bytes_in_use{method=\"f16\"}"), 0) << m;
  EXPECT_GT(metric_value(m, "vlkv:prefix_cache_bytes"), 0) << m;
  body["stream"] = false;
  body["max_tokens"] = 4;
  HttpReply again = post(c, "/v1/chat/completions", body.dump());
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_GT(again.json["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace vlkv
