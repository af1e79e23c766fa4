// `vlkv run ... --temp 0 --ignore-eos -n 32` reproduces llama.cpp's greedy
// continuation byte for byte (tokenizer, decoder, f16 cache and detokenizer end to end).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace vlkv {
namespace {

std::string fixtures() { return std::string(VLKV_TEST_DATA) + "/fixtures"; }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

class CliGreedy : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CliGreedy, MatchesLlamaCppByteForByte) {
  const auto& [model, kv] = GetParam();
  for (const char* prompt : {"p1_short", "p2_medium", "p3_long"}) {
    SCOPED_TRACE(model + " " + kv + " " + prompt);
    const nlohmann::json j =
        nlohmann::json::parse(read_file(fixtures() + "/text/" + model + "/kv-f32_fa-off/" + prompt + ".json"));
    const std::string expected = unhex(j["generated_text_hex"].get<std::string>());
    testing_cli::CliResult r = testing_cli::run_cli(
        {"run", "-m", fixtures() + "/models/" + model + ".gguf", "-p", read_file(fixtures() + "/prompts/" + prompt + ".txt"),
         "-n", "32", "--temp", "0", "--ignore-eos", "--kv", kv, "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected + "\n");  // the CLI ends the stream with one newline
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CliGreedy,
                         testing::Combine(testing::Values("stories260K", "rand-llama-hd64", "qwen2vl-tiny-text"),
                                          testing::Values("f16", "f32")),
                         [](const auto& info) {
                           std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (char& c : s) if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace vlkv
