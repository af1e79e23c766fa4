// --image-min-tokens / --image-max-tokens (llama.cpp's flags; issue 37 item 2): the Qwen-VL
// family's encoders resize each image or frame into the token budget given, the header count
// (--count-tokens) and the run agree on it, a video's frames take it too, and a projector with
// a fixed layout (LLaVA's mlp) refuses the flags by name instead of ignoring them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "../vision/zero_png.h"
#include "cli_util.h"

namespace vlkv {
namespace {

using namespace testing_cli;

std::string fixture(const char* f) { return std::string(VLKV_TEST_DATA) + "/fixtures/models/" + f; }

std::string write_png(const std::string& name, int w, int h) {
  const std::string path = ::testing::TempDir() + "vlkv_imgtok_" + std::to_string(getpid()) + "_" + name;
  const std::vector<uint8_t> bytes = test_png::zero_png(w, h);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// visual_tokens=M of --count-tokens, or -1.
long visual_tokens(const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  a.push_back("--count-tokens");
  const CliResult r = run_cli(a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("visual_tokens=");
  return at == std::string::npos ? -1 : std::atol(r.out.c_str() + at + 14);
}

struct Pair {
  const char* text;
  const char* mmproj;
};

class CliImageTokens : public ::testing::TestWithParam<Pair> {};

TEST_P(CliImageTokens, BoundsMoveTheCountAndTheRunAgrees) {
  const std::string big = write_png("big.png", 640, 480), small = write_png("small.png", 30, 30);
  auto args = [&](const std::string& png, std::vector<std::string> extra) {
    std::vector<std::string> a = {"run",  "-m", fixture(GetParam().text), "--mmproj", fixture(GetParam().mmproj),
                                  "--image", png, "-p", "What is it?", "-n", "1", "-t", "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const long big_default = visual_tokens(args(big, {}));
  const long big_capped = visual_tokens(args(big, {"--image-max-tokens", "16"}));
  // 640x480 is ~390 merged tokens at the default bounds (8 to 4096); capped at 16 it is resized
  // down to at most 16 (rounding each side to the merge grid may give fewer).
  EXPECT_GT(big_default, 100);
  EXPECT_GT(big_capped, 0);
  EXPECT_LE(big_capped, 16);
  const long small_default = visual_tokens(args(small, {}));
  const long small_raised = visual_tokens(args(small, {"--image-min-tokens", "64"}));
  EXPECT_LT(small_default, 64);
  EXPECT_GE(small_raised, 64);
  // The run encodes at the counted size (its embeddings fill exactly those rows).
  const CliResult ran = run_cli(args(big, {"--image-max-tokens", "16"}));
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.err.find("(" + std::to_string(big_capped) + " visual"), std::string::npos) << ran.err;
  // Out of order or out of range: refused at load with the reason.
  const CliResult bad = run_cli(args(big, {"--image-min-tokens", "64", "--image-max-tokens", "16"}));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("is above --image-max-tokens"), std::string::npos) << bad.err;
  std::remove(big.c_str());
  std::remove(small.c_str());
}

// Qwen2-VL and Qwen2.5-VL (vlkv refuses video for Qwen3-VL: its per-frame timestamps are not implemented).
TEST(CliImageTokensVideo, FramesTakeTheBudget) {
  const std::string clip = ::testing::TempDir() + "vlkv_imgtok_" + std::to_string(getpid()) + "_clip.mp4";
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i testsrc=size=320x240:rate=4 -frames:v 8 -c:v mpeg4 "
                         "-pix_fmt yuv420p '" + clip + "'").c_str()), 0);
  for (const Pair& p : {Pair{"qwen2vl-tiny-text.gguf", "mmproj-tiny-qwen2vl.gguf"},
                        Pair{"qwen25vl-tiny-text.gguf", "mmproj-tiny-qwen25vl.gguf"}}) {
    SCOPED_TRACE(p.mmproj);
    auto args = [&](std::vector<std::string> extra) {
      std::vector<std::string> a = {"run", "-m", fixture(p.text), "--mmproj", fixture(p.mmproj), "--video", clip,
                                    "--frames", "4", "-p", "What happens?", "-n", "1", "-t", "1"};
      a.insert(a.end(), extra.begin(), extra.end());
      return a;
    };
    const long full = visual_tokens(args({}));
    const long capped = visual_tokens(args({"--image-max-tokens", "8"}));
    EXPECT_GT(full, 0);
    EXPECT_GT(capped, 0);
    EXPECT_LT(capped * 4, full);  // a 320x240 frame takes several times 8 tokens at the default bounds
  }
  std::remove(clip.c_str());
}

INSTANTIATE_TEST_SUITE_P(QwenFamily, CliImageTokens,
                         ::testing::Values(Pair{"qwen2vl-tiny-text.gguf", "mmproj-tiny-qwen2vl.gguf"},
                                           Pair{"qwen25vl-tiny-text.gguf", "mmproj-tiny-qwen25vl.gguf"},
                                           Pair{"qwen3vl-tiny-text.gguf", "mmproj-tiny-qwen3vl.gguf"}),
                         [](const auto& info) { return std::string(info.param.mmproj).substr(12, 7); });

TEST(CliImageTokensRefused, AFixedLayoutProjectorNamesItsType) {
  const std::string png = write_png("shape.png", 64, 64);
  const CliResult r = run_cli({"run", "-m", std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes.gguf", "--mmproj",
                               std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes-mmproj.gguf", "--image", png,
                               "-p", "What is it?", "-n", "1", "--image-max-tokens", "16"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("(mlp) lays every image out at a fixed size"), std::string::npos) << r.err;
  const CliResult text = run_cli({"run", "-m", std::string(VLKV_SOURCE_DIR) + "/models/stories260K.gguf", "-p", "Once",
                                  "-n", "1", "--image-min-tokens", "4"});
  EXPECT_NE(text.exit_code, 0);
  EXPECT_NE(text.err.find("need a vision model"), std::string::npos) << text.err;
  std::remove(png.c_str());
}

}  // namespace
}  // namespace vlkv
