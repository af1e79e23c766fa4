// Bad input on the vision path, through the Engine API and the CLI: an image for
// a text-only model, an mmproj whose embedding size does not match the text
// model, a non-mmproj file as --mmproj, corrupt images, decompression bombs and
// marker/media mismatches. Each is a clear error (CLI exit status 2) and no
// answer is printed.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../tools/cli_util.h"
#include "vlm_tinyvlm_util.h"

namespace vlkv {
namespace {

using testing_cli::run_cli;

std::string fixture_model(const std::string& name) { return std::string(VLKV_TEST_DATA) + "/fixtures/models/" + name; }
std::string image0() { return tinyvlm::data_dir() + "/images/000.png"; }

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "vlkv_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(VlmBadInput, ImageGivenToTextOnlyModel) {
  EngineParams p;
  p.model_path = tinyvlm::model_path();  // no mmproj
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_FALSE((*e)->has_vision());
  Result<Image> img = load_image(image0());
  ASSERT_TRUE(img.is_ok());
  Prompt prompt{"What is this?", {MediaItem{{*img}, false}}, {}, {}};
  Result<PreparedPrompt> prepared = (*e)->prepare_prompt(prompt, true);
  ASSERT_FALSE(prepared.is_ok());
  EXPECT_EQ(prepared.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(prepared.status().message().find("no vision encoder"), std::string::npos);
  Result<std::unique_ptr<Session>> s = (*e)->new_session();
  ASSERT_TRUE(s.is_ok());
  std::string out;
  Status st = (*s)->generate(prompt, GenerateParams{}, [&](const std::string& piece) {
    out += piece;
    return true;
  }, nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ((*s)->n_past(), 0);
}

TEST(VlmBadInput, MmprojEmbeddingSizeMismatch) {
  EngineParams p;
  p.model_path = tinyvlm::model_path();                     // n_embd 128
  p.mmproj_path = fixture_model("mmproj-tiny-idefics3.gguf");  // projects to 64
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("n_embd 128"), std::string::npos) << e.status().message();
}

TEST(VlmBadInput, TextModelAsMmproj) {
  EngineParams p;
  p.model_path = tinyvlm::model_path();
  p.mmproj_path = tinyvlm::model_path();
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("not a multimodal projector"), std::string::npos) << e.status().message();
}

TEST(VlmBadInput, MarkerCountMismatch) {
  std::unique_ptr<Engine> e = tinyvlm::load_engine("f32");
  ASSERT_NE(e, nullptr);
  Result<Image> img = load_image(image0());
  ASSERT_TRUE(img.is_ok());
  Prompt two_markers{std::string(kMediaMarker) + "a" + kMediaMarker, {MediaItem{{*img}, false}}, {}, {}};
  EXPECT_EQ(e->prepare_prompt(two_markers, true).status().code(), StatusCode::kInvalidArgument);
  Prompt broken{"x", {MediaItem{{Image{}}, false}}, {}, {}};
  EXPECT_EQ(e->prepare_prompt(broken, true).status().code(), StatusCode::kInvalidArgument);
  // No markers: the image goes first, as with a marker at the start.
  Prompt none{"How many shapes are there?", {MediaItem{{*img}, false}}, {}, {}};
  Prompt first{std::string(kMediaMarker) + "How many shapes are there?", {MediaItem{{*img}, false}}, {}, {}};
  Result<PreparedPrompt> a = e->prepare_prompt(none, true);
  Result<PreparedPrompt> b = e->prepare_prompt(first, true);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_EQ(a->chunks.size(), b->chunks.size());
  EXPECT_EQ(a->n_visual_tokens(), 144);
  EXPECT_EQ(a->chunks.back().tokens, b->chunks.back().tokens);
}

class VlmCli : public ::testing::Test {
 protected:
  std::vector<std::string> base() {
    return {"run", "-m", tinyvlm::model_path(), "--mmproj", tinyvlm::mmproj_path(), "-p", "How many shapes are there?",
            "--temp", "0", "-t", "1"};
  }
};

TEST_F(VlmCli, AnswersAboutAnImage) {
  std::vector<std::string> args = base();
  args.insert(args.end(), {"--image", image0(), "-q"});
  testing_cli::CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, " one\n");
  EXPECT_TRUE(r.err.empty()) << r.err;  // -q, and no progress bar off a terminal
}

TEST_F(VlmCli, NoTemplatePassesThePromptUnchanged) {
  std::vector<std::string> args = {"run", "-m", tinyvlm::model_path(), "--mmproj", tinyvlm::mmproj_path(), "-p",
                                   "USER: <__media__>How many shapes are there?\nASSISTANT:", "--no-template",
                                   "--image", image0(), "--temp", "0", "-t", "1", "-q"};
  testing_cli::CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, " one\n");
}

TEST_F(VlmCli, BadInputsExitTwoWithoutAnswer) {
  const std::string garbage = write_temp("garbage.png", std::string(500, '\x5a'));
  std::string bomb_bytes = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                            0, 0, '\x27', '\x10', 0, 0, '\x27', '\x10', 8, 2, 0, 0, 0, 0, 0, 0, 0,
                            0, 0, 0, 0, 'I', 'D', 'A', 'T', 0, 0, 0, 0};  // 10000 x 10000
  const std::string bomb = write_temp("bomb.png", bomb_bytes);
  const std::string truncated = write_temp("truncated.png", tinyvlm::data_dir().empty() ? "" : [] {
    std::ifstream f(image0(), std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return s.substr(0, s.size() / 2);
  }());
  struct Case {
    const char* what;
    std::vector<std::string> args;
    const char* message;
  };
  std::vector<std::string> no_mmproj = {"run", "-m", tinyvlm::model_path(), "-p", "hi", "--image", image0()};
  std::vector<std::string> mismatch = {"run", "-m", tinyvlm::model_path(), "--mmproj",
                                       fixture_model("mmproj-tiny-idefics3.gguf"), "-p", "hi", "--image", image0()};
  std::vector<Case> cases = {
      {"image without mmproj", no_mmproj, "text-only"},
      {"mmproj of another model", mismatch, "n_embd"},
      {"garbage image", base(), "not a readable image"},
      {"decompression bomb", base(), "10000x10000"},
      {"truncated image", base(), "image"},
      {"missing image", base(), "cannot open"},
      {"missing video", base(), "cannot open"},
  };
  cases[2].args.insert(cases[2].args.end(), {"--image", garbage});
  cases[3].args.insert(cases[3].args.end(), {"--image", bomb});
  cases[4].args.insert(cases[4].args.end(), {"--image", truncated});
  cases[5].args.insert(cases[5].args.end(), {"--image", "/nonexistent.png"});
  cases[6].args.insert(cases[6].args.end(), {"--video", "/nonexistent.mp4"});
  for (const Case& c : cases) {
    testing_cli::CliResult r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.what << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.what << ": printed '" << r.out << "'";
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.what << ": " << r.err;
  }
  for (const std::string& p : {garbage, bomb, truncated}) std::remove(p.c_str());
}

TEST_F(VlmCli, VideoEndToEnd) {
  const std::string clip = ::testing::TempDir() + "vlkv_cli_clip_" + std::to_string(getpid()) + ".mp4";
  const std::string cmd = "ffmpeg -loglevel error -y -f lavfi -i testsrc=size=96x96:rate=10 -frames:v 6 "
                          "-c:v mpeg4 '" + clip + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::vector<std::string> args = base();
  args.insert(args.end(), {"--video", clip, "--frames", "2", "-n", "4"});
  testing_cli::CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("288 visual"), std::string::npos) << r.err;  // 2 frames x 144 tokens
  std::remove(clip.c_str());
}

}  // namespace
}  // namespace vlkv
