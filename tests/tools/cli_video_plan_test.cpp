// `vlkv run --video ... --plan` on the bundled tinyvlm-shapes pair (512-token context, 144 tokens
// per frame): the plan's token counts are the ones the (streamed) run then uses, and a clip over
// the context is refused by the plan with the flags that help (exit 2). Clips from the ffmpeg tool.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "cli_util.h"

namespace vlkv {
namespace {

std::string models() { return std::string(VLKV_SOURCE_DIR) + "/models/"; }

std::string make_clip(int n_frames) {
  const std::string path = ::testing::TempDir() + "vlkv_plan_" + std::to_string(getpid()) + "_" +
                           std::to_string(n_frames) + ".mp4";
  const std::string cmd = "ffmpeg -loglevel error -y -f lavfi -i testsrc=size=96x96:rate=4 -frames:v " +
                          std::to_string(n_frames) + " -pix_fmt yuv420p -c:v mpeg4 -q:v 2 " + path + " 2>/dev/null";
  return std::system(cmd.c_str()) == 0 ? path : std::string();
}

std::vector<std::string> run_args(const std::string& clip, int frames) {
  return {"run", "-m", models() + "tinyvlm-shapes.gguf", "--mmproj", models() + "tinyvlm-shapes-mmproj.gguf",
          "--video", clip, "--frames", std::to_string(frames), "-p", "How many shapes are there?", "--temp", "0",
          "-n", "4", "-t", "2", "--kv", "kivi2"};
}

TEST(CliVideoPlan, ThePlanCountsWhatTheRunUses) {
  const std::string clip = make_clip(8);
  ASSERT_FALSE(clip.empty()) << "the ffmpeg tool could not make the test clip";
  std::vector<std::string> plan_args = run_args(clip, 3);
  plan_args.push_back("--plan");
  const auto plan = testing_cli::run_cli(plan_args);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(plan.out, m, std::regex("plan: 3 frame\\(s\\); ([0-9,]+) prompt tokens \\(([0-9,]+) visual\\)")))
      << plan.out;
  const std::string tokens = std::regex_replace(m[1].str(), std::regex(","), "");
  const std::string visual = std::regex_replace(m[2].str(), std::regex(","), "");
  EXPECT_EQ(visual, "432");  // 3 frames x 144
  EXPECT_NE(plan.out.find("KV with kivi2:"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("fits the context"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("time: encoder"), std::string::npos) << plan.out;
  const auto run = testing_cli::run_cli(run_args(clip, 3));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find(tokens + " prompt tokens (" + visual + " visual"), std::string::npos)
      << "plan said " << tokens << "/" << visual << "; the run: " << run.err;
  std::remove(clip.c_str());
}

// Issue 37's check: for 3 videos x 3 methods on tinyvideo (frame labels between frames), the
// plan's prompt tokens are the run's, and the KV bytes it plans (admission's reservation for the
// prompt and the -n answer) bound what the run then holds.
TEST(CliVideoPlan, ThreeVideosThreeMethodsPlanWhatTheRunHolds) {
  const std::vector<int> lengths = {4, 12, 24};
  for (int n : lengths) {
    const std::string clip = make_clip(n);
    ASSERT_FALSE(clip.empty());
    for (const char* kv : {"f16", "kivi2", "vidkv"}) {
      SCOPED_TRACE(std::to_string(n) + " frames, " + kv);
      const std::vector<std::string> run = {"run", "-m", models() + "tinyvideo.gguf", "--mmproj",
                                            models() + "tinyvideo-mmproj.gguf", "--video", clip, "--frames",
                                            std::to_string(n), "-p", "What colour was the first shape?", "--temp",
                                            "0", "-n", "4", "-t", "2", "--kv", kv};
      std::vector<std::string> plan_args = run;
      plan_args.push_back("--plan");
      const auto plan = testing_cli::run_cli(plan_args);
      ASSERT_EQ(plan.exit_code, 0) << plan.err;
      std::smatch t, b;
      ASSERT_TRUE(std::regex_search(plan.out, t, std::regex("([0-9,]+) prompt tokens \\(([0-9,]+) visual\\)"))) << plan.out;
      ASSERT_TRUE(std::regex_search(plan.out, b, std::regex("KV with [^:]+: at most [0-9.]+ MiB \\(([0-9]+) B\\)")))
          << plan.out;
      const std::string tokens = std::regex_replace(t[1].str(), std::regex(","), "");
      const std::string visual = std::regex_replace(t[2].str(), std::regex(","), "");
      const auto ran = testing_cli::run_cli(run);
      ASSERT_EQ(ran.exit_code, 0) << ran.err;
      EXPECT_NE(ran.err.find(tokens + " prompt tokens (" + visual + " visual"), std::string::npos)
          << "plan said " << tokens << "/" << visual << "; the run: " << ran.err;
      std::smatch h;
      ASSERT_TRUE(std::regex_search(ran.err, h, std::regex("held ([0-9]+) B"))) << ran.err;
      EXPECT_LE(std::stoull(h[1].str()), std::stoull(b[1].str())) << "held more than the plan reserved";
    }
    std::remove(clip.c_str());
  }
}

TEST(CliVideoPlan, OverTheContextTheFlagsThatHelp) {
  const std::string clip = make_clip(8);
  ASSERT_FALSE(clip.empty());
  std::vector<std::string> args = run_args(clip, 8);  // 8 x 144 > 512
  args.push_back("--plan");
  const auto r = testing_cli::run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.out.find("does not fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--frames, --fps"), std::string::npos) << r.out;
  std::remove(clip.c_str());
}

// A streamed video ingested once into a KV file (the follow-up path for long videos), then a
// question about it from the file: the file loads and the question is answered.
TEST(CliVideoPlan, AStreamedIngestSavedThenAskedFromTheFile) {
  const std::string clip = make_clip(8);
  ASSERT_FALSE(clip.empty());
  const std::string kv = ::testing::TempDir() + "vlkv_plan_" + std::to_string(getpid()) + ".kv";
  std::vector<std::string> ingest = run_args(clip, 2);
  ingest.insert(ingest.end(), {"--save-kv", kv});
  const auto saved = testing_cli::run_cli(ingest);
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_NE(saved.err.find("saved"), std::string::npos) << saved.err;
  const auto asked = testing_cli::run_cli({"run", "-m", models() + "tinyvlm-shapes.gguf", "--mmproj",
                                           models() + "tinyvlm-shapes-mmproj.gguf", "--load-kv", kv, "-p",
                                           "Describe the image.", "--temp", "0", "-n", "8", "--kv", "kivi2"});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_NE(asked.err.find("loaded"), std::string::npos) << asked.err;
  EXPECT_FALSE(asked.out.empty());
  std::remove(kv.c_str());
  std::remove(clip.c_str());
}

}  // namespace
}  // namespace vlkv
