// vlkv serve on LLaVA-NeXT (stories260K + mmproj-tiny-llava16): two image chats sent at
// once (the batched scheduler decodes them together) answer with llama.cpp's greedy text
// for the fixture prompt, with 103 / 87 prompt tokens (tiles + overview), as vlkv run does.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "serve_util.h"
#include "vlm_batch2_golden.h"

namespace vlkv {
namespace {

using nlohmann::json;
using namespace testing_serve;

TEST(ServeLlava16, ConcurrentImageChatsMatchLlamaCpp) {
  const std::string models = batch2::fixtures() + "/models/";
  ServerProcess server({"-m", models + "stories260K.gguf", "--mmproj", models + "mmproj-tiny-llava16.gguf", "-t", "2",
                        "-np", "2", "--kv", "f32", "--kv-budget", "64M"});
  ASSERT_TRUE(server.running()) << server.log();
  const std::string text = batch2::read_file(batch2::fixtures() + "/prompts/vlm_p1.txt");
  const std::string marker = kMediaMarker;
  const size_t at = text.find(marker);
  ASSERT_NE(at, std::string::npos);
  const std::vector<std::string> runs = {"vlm_p1", "vlm_p1_wide"};
  std::vector<HttpReply> replies(runs.size());
  std::vector<json> fixtures(runs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < runs.size(); ++i) {
    fixtures[i] = json::parse(batch2::read_file(batch2::fixtures() + "/vlm/llava16/kv-f32_fa-off/" + runs[i] + ".json"));
    const std::string image = batch2::fixtures() + "/images/" + fixtures[i]["image"].get<std::string>();
    // The prompt's text around its media marker, the image part in its place.
    const json body = {
        {"messages",
         {{{"role", "user"},
           {"content",
            {{{"type", "text"}, {"text", text.substr(0, at)}},
             {{"type", "image_url"}, {"image_url", {{"url", image_data_uri(image)}}}},
             {{"type", "text"}, {"text", text.substr(at + marker.size())}}}}}}},
        {"temperature", 0},
        {"max_tokens", 16}};
    threads.emplace_back([&, i, body] {
      httplib::Client c = server.client();
      replies[i] = post(c, "/v1/chat/completions", body.dump());
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(runs[i]);
    const HttpReply& r = replies[i];
    ASSERT_EQ(r.status, 200) << r.error << r.body;
    const std::string answer = r.json["choices"][0]["message"]["content"];
    const std::string expected = batch2::trusted_prefix(fixtures[i]);
    EXPECT_EQ(answer.substr(0, expected.size()), expected) << "llama.cpp: " << fixtures[i]["generated_text"];
    EXPECT_EQ(r.json["usage"]["prompt_tokens"].get<int64_t>(), fixtures[i]["n_positions"].get<int64_t>());
    EXPECT_GT(r.json["kv"]["held_bytes"].get<double>(), 0);
  }
}

}  // namespace
}  // namespace vlkv
