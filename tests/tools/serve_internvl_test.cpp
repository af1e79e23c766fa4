// vlkv serve with the InternVL pair (internvl projector, qwen2 text): image chat answers equal
// vlkv run's for the same image and question, under the default KV method and per-request
// methods that read token kinds (vidkv, qcache_vla), with two requests in flight.
#include <gtest/gtest.h>

#include <future>

#include "cli_util.h"
#include "serve_util.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

std::string fixture(const std::string& rel) { return std::string(VLKV_TEST_DATA) + "/fixtures/" + rel; }
const std::string kModel = fixture("models/internvl-tiny-text.gguf");
const std::string kMmproj = fixture("models/mmproj-tiny-internvl.gguf");

std::string run_answer(const std::string& image, const std::string& question, const std::string& kv) {
  testing_cli::CliResult r = testing_cli::run_cli({"run", "-m", kModel, "--mmproj", kMmproj, "-t", "1", "-q", "--temp",
                                                   "0", "-n", "12", "--kv", kv, "--image", image, "-p",
                                                   question});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  return r.out;
}

json image_question(const std::string& image, const std::string& question, const std::string& kv) {
  return {{"messages",
           {{{"role", "user"},
             {"content",
              {{{"type", "image_url"}, {"image_url", {{"url", image_data_uri(image)}}}},
               {{"type", "text"}, {"text", question}}}}}}},
          {"temperature", 0},
          {"max_tokens", 12},
          {"kv", kv}};
}

TEST(ServeInternvl, ImageChatEqualsRunPerMethod) {
  ServerProcess server({"-m", kModel, "--mmproj", kMmproj, "-t", "1", "-np", "2", "--kv", "f16", "--kv-allow",
                        "vidkv,qcache_vla", "--kv-budget", "64M"});
  ASSERT_TRUE(server.running()) << server.log();
  const std::string wide = fixture("images/test_image_128x48.png"), square = fixture("images/test_image_64.png");
  // Questions whose greedy answers are valid UTF-8 (the server's JSON replaces invalid bytes,
  // which vlkv run prints raw; the random model emits lone bytes for other questions).
  const std::vector<std::pair<std::string, std::string>> asks = {{wide, "Tell me a story."},
                                                                 {square, "What does it show?"}};
  for (const std::string kv : {"f16", "vidkv", "qcache_vla"}) {
    SCOPED_TRACE(kv);
    // Both requests at once (the scheduler batches them).
    std::vector<std::future<HttpReply>> replies;
    for (const auto& [image, question] : asks) {
      replies.push_back(std::async(std::launch::async, [&server, image, question, kv] {
        httplib::Client c = server.client();
        return post(c, "/v1/chat/completions", image_question(image, question, kv).dump());
      }));
    }
    for (size_t i = 0; i < asks.size(); ++i) {
      const HttpReply reply = replies[i].get();
      ASSERT_EQ(reply.status, 200) << reply.body;
      const std::string answer = reply.json["choices"][0]["message"]["content"];
      EXPECT_FALSE(answer.empty());
      EXPECT_EQ(answer, run_answer(asks[i].first, asks[i].second, kv)) << asks[i].first;
      EXPECT_EQ(reply.json["kv"]["method"], kv);
      EXPECT_GT(reply.json["kv"]["held_bytes"].get<double>(), 0);
    }
  }
}

}  // namespace
}  // namespace vlkv
