// vlkv bench --mmproj --image/--video: one JSON line per KV method with encode_ms,
// prefill_tok_s and ttft_ms, on the bundled tinyvlm pair. The token counts must equal what
// `vlkv run --count-tokens` lays out for the same prompt and media (the same prompt builder);
// the times must be positive and consistent (ttft = encode + prefill of the same repetition,
// so the best ttft is at least the best encode plus the best prefill); bad flag
// combinations are refused with exit status 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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
const std::string kImage = std::string(VLKV_TEST_DATA) + "/vlm/tinyvlm/images/000.png";

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> rows;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) nl = out.size();
    if (nl > pos) rows.push_back(nlohmann::json::parse(out.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  return rows;
}

// (prompt tokens, visual tokens) that vlkv run lays out for the prompt and media.
std::pair<long long, long long> run_counts(const std::vector<std::string>& media_args) {
  std::vector<std::string> args = {"run", "-m", kModel, "--mmproj", kMmproj, "-p", "Describe the image.", "--count-tokens"};
  args.insert(args.end(), media_args.begin(), media_args.end());
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  long long prompt = -1, visual = -1;
  EXPECT_EQ(std::sscanf(r.out.c_str(), "prompt_tokens=%lld visual_tokens=%lld", &prompt, &visual), 2) << r.out;
  return {prompt, visual};
}

void expect_sane_row(const nlohmann::json& j, long long n_prompt, long long n_visual) {
  for (const char* key : {"encode_ms", "prefill_ms", "prefill_tok_s", "ttft_ms", "n_prompt_tokens", "n_visual_tokens"})
    ASSERT_TRUE(j.contains(key)) << key << " missing: " << j.dump();
  EXPECT_EQ(j["n_prompt_tokens"].get<long long>(), n_prompt);
  EXPECT_EQ(j["n_visual_tokens"].get<long long>(), n_visual);
  const double encode = j["encode_ms"], prefill = j["prefill_ms"], ttft = j["ttft_ms"], tok_s = j["prefill_tok_s"];
  EXPECT_GT(encode, 0);
  EXPECT_GT(prefill, 0);
  EXPECT_GT(tok_s, 0);
  // prefill_tok_s is the whole prompt over prefill_ms (1e-6 relative: printing rounds nothing else).
  EXPECT_NEAR(tok_s, static_cast<double>(n_prompt) / (prefill * 1e-3), 1e-6 * tok_s);
  EXPECT_GE(ttft, encode);
  EXPECT_GE(ttft, prefill);
  EXPECT_LT(ttft, 60e3);  // a 177-token prompt on a 4-layer toy: far under a minute on any machine
  EXPECT_FALSE(j["simd"].get<std::string>().empty());
  EXPECT_GT(j["threads"].get<int>(), 0);
}

TEST(BenchMedia, ImageRowsPerMethodMatchRunLayout) {
  const auto [n_prompt, n_visual] = run_counts({"--image", kImage});
  ASSERT_EQ(n_visual, 144);  // tinyvlm: 12 x 12 patches after its projector
  const CliResult r = run_cli({"bench", "-m", kModel, "--mmproj", kMmproj, "--image", kImage, "--kv", "f16,int4",
                               "-r", "2", "-t", "2", "-p", "Describe the image.", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0]["method"], "f16");
  EXPECT_EQ(rows[1]["method"], "int4");
  for (const nlohmann::json& j : rows) {
    expect_sane_row(j, n_prompt, n_visual);
    EXPECT_EQ(j["repetitions"], 2);
    EXPECT_EQ(j["engine"]["mmproj"], kMmproj);
  }
}

TEST(BenchMedia, VideoRowCountsItsFrames) {
  const std::string clip = ::testing::TempDir() + "vlkv_bench_media_" + std::to_string(getpid()) + ".mp4";
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i testsrc=size=64x48:rate=10 -frames:v 12 -c:v mpeg4 " +
                         testing_cli::shell_quote(clip)).c_str()),
            0);
  const auto [n_prompt, n_visual] = run_counts({"--video", clip, "--frames", "2"});
  const CliResult r = run_cli({"bench", "-m", kModel, "--mmproj", kMmproj, "--video", clip, "--frames", "2", "-t", "2",
                               "-p", "Describe the image.", "--json"});
  std::remove(clip.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<nlohmann::json> rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.out;
  EXPECT_GT(n_visual, 144);  // two frames
  expect_sane_row(rows[0], n_prompt, n_visual);
  EXPECT_EQ(rows[0]["n_videos"], 1);
}

TEST(BenchMedia, TableNamesTheColumns) {
  const CliResult r = run_cli({"bench", "-m", kModel, "--mmproj", kMmproj, "--image", kImage, "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("encode ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ttft ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# simd: "), std::string::npos) << r.out;
}

TEST(BenchMedia, RefusesMediaWithoutMmprojAndMmprojWithoutMedia) {
  CliResult r = run_cli({"bench", "-m", kModel, "--image", kImage});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--mmproj"), std::string::npos) << r.err;
  r = run_cli({"bench", "-m", kModel, "--mmproj", kMmproj});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--image"), std::string::npos) << r.err;
  r = run_cli({"bench", "-m", kModel, "--mmproj", kMmproj, "--image", kImage, "--kv", "nosuchmethod"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace vlkv
