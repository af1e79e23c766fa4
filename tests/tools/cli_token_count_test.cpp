// `vlkv run` counts the prompt's tokens from the media files' headers before decoding them
// (issue 22 item 6): --count-tokens prints what the run then reports as its prompt tokens
// (images and a video, exact), and a prompt over the context is refused before any pixel
// is decoded (8 PNGs of ~410 KB that decode to 8192 x 8192: well under a second, where
// decoding them takes seconds and 1.5 GiB).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "../vision/zero_png.h"
#include "cli_util.h"

namespace vlkv {
namespace {

using Clock = std::chrono::steady_clock;
using namespace testing_cli;

std::string model() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes.gguf"; }
std::string mmproj() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes-mmproj.gguf"; }
std::string fixture(const char* f) { return std::string(VLKV_TEST_DATA) + "/fixtures/models/" + f; }

std::string write_temp(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = ::testing::TempDir() + "vlkv_tokcount_" + std::to_string(getpid()) + "_" + name;
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// "N prompt tokens (M visual" from the run's stats line.
std::pair<long, long> reported_tokens(const std::string& err) {
  const size_t at = err.find(" prompt tokens");
  if (at == std::string::npos) return {-1, -1};
  size_t begin = err.rfind(' ', at - 1);
  const long n = std::atol(err.c_str() + begin + 1);
  const size_t v = err.find(" (", at);
  const long m = v == at + 14 ? std::atol(err.c_str() + v + 2) : 0;
  return {n, m};
}

TEST(CliTokenCount, CountFromHeadersEqualsTheRunsPromptTokens) {
  const std::string png = write_temp("a.png", test_png::zero_png(50, 30));
  const std::string clip = ::testing::TempDir() + "vlkv_tokcount_" + std::to_string(getpid()) + "_clip.mp4";
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i testsrc=size=40x24:rate=10 -frames:v 12 -c:v mpeg4 "
                         "-pix_fmt yuv420p '" + clip + "'").c_str()), 0);
  struct Case {
    std::string model, mmproj;
    std::vector<std::string> media;
  };
  const std::vector<Case> cases = {
      {model(), mmproj(), {"--image", png}},
      {model(), mmproj(), {"--video", clip, "--frames", "2"}},
      {fixture("qwen2vl-tiny-text.gguf"), fixture("mmproj-tiny-qwen2vl.gguf"), {"--image", png, "--image", png}},
      {fixture("qwen2vl-tiny-text.gguf"), fixture("mmproj-tiny-qwen2vl.gguf"), {"--video", clip, "--frames", "3"}},
      {fixture("qwen2vl-tiny-text.gguf"), fixture("mmproj-tiny-qwen2vl.gguf"), {"--video", clip, "--fps", "4"}},
      {fixture("stories260K-idefics3-text.gguf"), fixture("mmproj-tiny-idefics3.gguf"), {"--image", png}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"run", "-m", c.model, "--mmproj", c.mmproj, "-p", "What is it?", "-n", "1", "-t", "1"};
    args.insert(args.end(), c.media.begin(), c.media.end());
    SCOPED_TRACE(c.mmproj + " " + c.media[0] + " " + c.media.back());
    std::vector<std::string> count_args = args;
    count_args.push_back("--count-tokens");
    CliResult counted = run_cli(count_args);
    ASSERT_EQ(counted.exit_code, 0) << counted.err;
    CliResult ran = run_cli(args);
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    const auto [n, m] = reported_tokens(ran.err);
    ASSERT_GT(n, 0) << ran.err;
    EXPECT_EQ(counted.out, "prompt_tokens=" + std::to_string(n) + " visual_tokens=" + std::to_string(m) + "\n");
  }
  std::remove(png.c_str());
  std::remove(clip.c_str());
}

TEST(CliTokenCount, OverLongPromptRefusedBeforeDecoding) {
  const std::string big = write_temp("big.png", test_png::zero_png(8192, 8192));
  std::vector<std::string> args = {"run", "-m", model(), "--mmproj", mmproj(), "-p", "hi", "-n", "1"};
  for (int i = 0; i < 8; ++i) args.insert(args.end(), {"--image", big});
  const auto t0 = Clock::now();
  CliResult r = run_cli(args);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::remove(big.c_str());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // Measured 0.04-0.08 s with the model load (decoding the 8 images took 3 s and 1.8 GB);
  // 5 s leaves a loaded machine room. The message is the new path's proof: counted, not decoded.
  EXPECT_LT(seconds, 5.0);
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1152 visual tokens, counted from their headers"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vlkv
