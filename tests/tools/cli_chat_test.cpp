// `vlkv chat` against llama-mtmd-cli's chat mode on the bundled VLM: the same scripted
// conversations (images, several turns, a --n-predict that cuts answers, /clear) give
// llama-mtmd-cli's answers byte for byte (greedy; tests/data/fixtures/chat/ says how they
// were recorded). Exact: the turn texts and the cache are llama-mtmd-cli's (each turn feeds
// only what the template adds; generated tokens stay as generated), and vlkv's decoder
// matches llama.cpp's greedy text on this model (tests/engine/vlm_tinyvlm_*_test.cpp).
// Then the commands' errors: a bad line is reported and the conversation goes on.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"

namespace vlkv {
namespace {

using testing_cli::CliResult;
using testing_cli::run_cli;

const std::string kModel = std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes.gguf";
const std::string kMmproj = std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes-mmproj.gguf";

// Media paths in the fixture are relative to the source tree.
std::string script_text(const nlohmann::json& lines) {
  std::string text;
  for (const auto& l : lines) {
    std::string line = l.get<std::string>();
    if (line.rfind("/image ", 0) == 0) line = "/image " + std::string(VLKV_SOURCE_DIR) + "/" + line.substr(7);
    text += line + "\n";
  }
  return text;
}

CliResult chat(const std::string& script, int n_predict, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"chat", "-m", kModel, "--mmproj", kMmproj, "--temp", "0", "-n",
                                   std::to_string(n_predict), "-t", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args, &script);
}

TEST(CliChat, AnswersAsLlamaMtmdCliChatMode) {
  std::ifstream f(std::string(VLKV_TEST_DATA) + "/fixtures/chat/tinyvlm_mtmd_chat.json");
  ASSERT_TRUE(f) << "fixture missing";
  const nlohmann::json fx = nlohmann::json::parse(f);
  ASSERT_EQ(fx["conversations"].size(), 3u);
  for (const auto& c : fx["conversations"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const CliResult r = chat(script_text(c["script"]), c["n_predict"].get<int>(), {"-q"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string want;
    for (const auto& a : c["answers"]) want += a.get<std::string>() + "\n";
    EXPECT_EQ(r.out, want) << r.err;
    EXPECT_EQ(r.err, "");
  }
}

// Turn 2 reuses turn 1's cache: only its own few tokens are new, the image's are cached.
TEST(CliChat, LaterTurnsEvaluateOnlyTheirOwnTokens) {
  const std::string script = "/image " + std::string(VLKV_SOURCE_DIR) +
                             "/models/demo/005.png\nHow many shapes are there?\nDescribe the image.\n/stats\n";
  const CliResult r = chat(script, 8);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // "N new prompt tokens (V visual), C cached from earlier turns"
  std::vector<long long> news, visual, cached;
  for (size_t at = r.err.find(" new prompt tokens"); at != std::string::npos;
       at = r.err.find(" new prompt tokens", at + 1)) {
    const size_t line = r.err.rfind("vlkv: ", at);
    long long n = 0, v = 0, c = 0;
    ASSERT_EQ(std::sscanf(r.err.c_str() + line, "vlkv: %lld new prompt tokens (%lld visual), %lld cached", &n, &v, &c),
              3)
        << r.err;
    news.push_back(n);
    visual.push_back(v);
    cached.push_back(c);
  }
  ASSERT_EQ(news.size(), 2u) << r.err;
  EXPECT_EQ(visual[0], 144);  // tinyvlm: 144 visual tokens per image
  EXPECT_EQ(visual[1], 0);
  EXPECT_EQ(cached[0], 0);
  EXPECT_GT(cached[1], news[0]);  // the first turn's prompt and answer
  EXPECT_LT(news[1], 48);  // "\nUSER: Describe the image.\nASSISTANT:": 32 of tinyvlm's small-vocabulary tokens
  EXPECT_NE(r.err.find("4 messages, "), std::string::npos) << r.err;  // 2 questions, 2 answers
}

TEST(CliChat, BadLinesAreReportedAndTheConversationGoesOn) {
  const std::string script = "/image /nonexistent/x.png\n/image\n/frobnicate\n/kv nosuchmethod\n/clear now\n"
                             "/image " + std::string(VLKV_SOURCE_DIR) + "/models/demo/005.png\n"
                             "How many shapes are there?\n";
  const CliResult r = chat(script, 32, {"-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, " two\n") << r.err;
  EXPECT_NE(r.err.find("/nonexistent/x.png"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/image needs an image file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown command /frobnicate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nosuchmethod"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/clear takes no argument"), std::string::npos) << r.err;
}

// /kv evaluates the same conversation again under another method; the cache then holds the
// same tokens at that method's size, and the conversation continues.
TEST(CliChat, KvSwitchKeepsTheConversation) {
  const std::string script = "/image " + std::string(VLKV_SOURCE_DIR) +
                             "/models/demo/005.png\nHow many shapes are there?\n/stats\n/kv kivi:bits=2\n"
                             "Describe the image.\n/stats\n";
  const CliResult r = chat(script, 8);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  long long t1 = 0, t2 = 0, t3 = 0;
  double k1 = 0, k2 = 0;
  const size_t a = r.err.find("2 messages, ");
  const size_t b = r.err.find("2 messages, ", a + 1);  // printed by /kv
  const size_t c = r.err.find("4 messages, ");
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos) << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + a, "2 messages, %lld tokens in the cache, KV method f16, held %lf B", &t1, &k1), 2)
      << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + b, "2 messages, %lld tokens in the cache, KV method kivi:bits=2, held %lf B", &t2,
                        &k2),
            2)
      << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + c, "4 messages, %lld tokens", &t3), 1) << r.err;
  EXPECT_EQ(t1, t2);
  EXPECT_GT(t3, t2);
  EXPECT_LT(k2, k1);  // 2-bit pages hold less than f16's
}

// --image at the start goes with the first message, as a /image line before it does.
TEST(CliChat, ImageGivenAtStartGoesWithTheFirstMessage) {
  const CliResult r = chat("How many shapes are there?\n", 32,
                           {"--image", std::string(VLKV_SOURCE_DIR) + "/models/demo/005.png"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, " two\n") << r.err;
  EXPECT_NE(r.err.find("005.png (96x96) goes with your next message"), std::string::npos) << r.err;
}

// A """ block and a line ending in '\' are one message each (2 questions, 2 answers).
TEST(CliChat, MultiLineMessages) {
  const std::string script = "/image " + std::string(VLKV_SOURCE_DIR) +
                             "/models/demo/005.png\n\"\"\"\nHow many shapes\nare there?\n\"\"\"\n"
                             "Describe \\\nthe image.\n/stats\n";
  const CliResult r = chat(script, 8);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("4 messages, "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("6 messages, "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vlkv
