// A request whose images' token count, read from their headers, cannot fit is refused with
// 400 before any pixel is decoded (issue 24's probe: 8 PNGs of a few hundred KB that decode
// to 8192 x 8192 took 31 s and +1.7 GB before "context full"; issue 22 item 6). Bounded:
// refusals come within 1 s (the median of 24; none over 5 s on a loaded machine); the first may grow RSS by the body's parsing (< 32 MiB,
// where one decoded image would be +256 MiB), 24 of them by < 64 MiB, and RSS must level
// off (no memory held per request). A request that fits still decodes and answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../vision/zero_png.h"
#include "serve_raw.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using namespace testing_serve;
using Clock = std::chrono::steady_clock;

std::string png_uri(const std::vector<uint8_t>& png) {
  return "data:image/png;base64," + server::encode_base64(png.data(), png.size());
}

std::string chat_with_images(const std::vector<std::string>& uris, int max_tokens = 2) {
  nlohmann::json content = nlohmann::json::array();
  for (const std::string& u : uris) content.push_back({{"type", "image_url"}, {"image_url", {{"url", u}}}});
  content.push_back({{"type", "text"}, {"text", "What is in these pictures?"}});
  nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", content}}}},
                         {"max_tokens", max_tokens},
                         {"temperature", 0}};
  return body.dump();
}

// tinyvlm: 144 visual tokens per image whatever its size, a context of 512.
std::vector<std::string> budget_server_flags() {
  return {"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "2", "--kv-budget", "256M", "--max-body",
          "32M", "--allowed-hosts", "x"};  // the raw requests' "Host: x" (a loopback server checks Host)
}

class ServeTokenBudget : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(budget_server_flags()); }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override { ASSERT_TRUE(server_->running()) << server_->log(); }
  static ServerProcess* server_;
};
ServerProcess* ServeTokenBudget::server_ = nullptr;

// POSTs body on one keep-alive connection, then asks GET /health on it: the server reads the
// next request of a connection only once the last one is done (its body freed, the heap
// trimmed: HttpListener's serve()), so the /health reply says the POST's memory is released.
// RSS read right after the POST's own reply can be read before that, while the handler thread
// is still freeing: on a loaded machine a probe then looked as if it held its request's
// memory. The two raw replies.
std::string post_then_settle(int port, const std::string& path, const std::string& body) {
  RawConnection c(port);
  c.send("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  return c.read_replies(2, 30000);
}

TEST_F(ServeTokenBudget, EightHugePngsRefusedFromTheirHeadersAtOnce) {
  // Its own server, whose allocator returns what is freed (Rss::kHonest: RSS means what is
  // held under ASan too); each probe settles (post_then_settle) before its RSS sample.
  ServerProcess server(budget_server_flags(), Rss::kHonest);
  ASSERT_TRUE(server.running()) << server.log();
  const std::vector<uint8_t> png = test_png::zero_png(8192, 8192);  // ~410 KB, 64 Mi pixels decoded
  const std::string body = chat_with_images(std::vector<std::string>(8, png_uri(png)));
  const std::vector<int> refused = {400, 200}, answered = {200, 200};
  const std::string warm = post_then_settle(server.port(), "/v1/chat/completions",
                                            chat_with_images({png_uri(test_png::zero_png(16, 16))}));
  EXPECT_EQ(reply_statuses(warm), answered) << warm;
  const uint64_t rss_before = resident_bytes(server.pid());
  const auto t0 = Clock::now();
  const std::string first = post_then_settle(server.port(), "/v1/chat/completions", body);
  std::vector<double> times = {std::chrono::duration<double>(Clock::now() - t0).count()};
  const uint64_t rss_after = resident_bytes(server.pid());
  EXPECT_EQ(reply_statuses(first), refused) << first;
  EXPECT_NE(first.find("context full"), std::string::npos) << first;
  EXPECT_NE(first.find("1152 visual tokens, counted from their headers"), std::string::npos) << first;
  // The body (4.4 MB of base64, parsed and its images' bytes held while parsing) may leave
  // glibc's arenas larger; one decoded image would be 64 MiB (stb_image's grey) + 192 MiB (RGB).
  EXPECT_LT(rss_after, rss_before + (32u << 20)) << rss_before << " -> " << rss_after;
  // Nothing is held per request: sequential requests run on the same warm handler thread
  // (WorkerPool is LIFO), and after a body over 1 MiB the server hands free memory back
  // (malloc_trim), so RSS stays level. Each sample is taken once its probe is done, so none
  // catches a request's memory before its trim; the check compares the highest sample of
  // probes 17-24 with the highest of 9-16 (growth per request shows there; measured before
  // both changes: +23 MiB over 40 probes, still rising past probe 16 on a loaded machine).
  std::vector<uint64_t> rss(25, 0);
  for (int i = 2; i <= 24; ++i) {
    const auto t = Clock::now();
    EXPECT_EQ(reply_statuses(post_then_settle(server.port(), "/v1/chat/completions", body)), refused);
    times.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    rss[static_cast<size_t>(i)] = resident_bytes(server.pid());
  }
  const uint64_t max_9_16 = *std::max_element(rss.begin() + 9, rss.begin() + 17);
  const uint64_t max_17_24 = *std::max_element(rss.begin() + 17, rss.end());
  // Each round trip moves and parses a 4.4 MB body: ~15-30 ms on an idle machine (decoding
  // the 8 images took 3 s and 1.7 GiB before); the median is held to the 1 s so a
  // shared, loaded CI machine's stalls (one probe took 1.18 s under 4 parallel builds on 2
  // cores) do not fail it, and none may take 5 s.
  std::sort(times.begin(), times.end());
  EXPECT_LT(times[times.size() / 2], 1.0);
  EXPECT_LT(times.back(), 5.0);
  EXPECT_LT(max_17_24, max_9_16 + (4u << 20)) << max_9_16 << " -> " << max_17_24;
  EXPECT_LT(max_17_24, rss_before + (64u << 20)) << rss_before << " -> " << max_17_24;
}

TEST_F(ServeTokenBudget, HostileHeaderRefusedAtOnce) {
  const std::vector<uint8_t> png = test_png::zero_png(60000, 60000, /*data_rows=*/2);
  httplib::Client c = server_->client(30);
  const auto t0 = Clock::now();
  HttpReply r = post(c, "/v1/chat/completions", chat_with_images({png_uri(png)}));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("60000x60000"), std::string::npos) << r.body;
}

// The count is the prompt's: what fits (3 images: 3 x 144 + text < 512) is decoded and
// answered, and usage.prompt_tokens equals the count `vlkv run --count-tokens` prints for
// the same message and images.
TEST_F(ServeTokenBudget, WhatFitsIsDecodedAndItsCountIsTheUsage) {
  const std::vector<uint8_t> png = test_png::zero_png(40, 70);
  httplib::Client c = server_->client(60);
  HttpReply r = post(c, "/v1/chat/completions", chat_with_images(std::vector<std::string>(3, png_uri(png)), 1));
  ASSERT_EQ(r.status, 200) << r.body;
  const int64_t prompt_tokens = r.json["usage"]["prompt_tokens"].get<int64_t>();
  const std::string path = ::testing::TempDir() + "vlkv_budget_" + std::to_string(getpid()) + ".png";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  }
  const std::string cmd = std::string(VLKV_CLI_PATH) + " run -m '" + model_path() + "' --mmproj '" + mmproj_path() +
                          "' -p 'What is in these pictures?' --image '" + path + "' --image '" + path + "' --image '" +
                          path + "' --count-tokens";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  char line[256] = {};
  const bool got = std::fgets(line, sizeof line, p) != nullptr;
  pclose(p);
  std::remove(path.c_str());
  ASSERT_TRUE(got);
  EXPECT_EQ(std::string(line), "prompt_tokens=" + std::to_string(prompt_tokens) + " visual_tokens=432\n");
}

}  // namespace
}  // namespace vlkv
