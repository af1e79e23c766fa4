// Videos in chat requests: a `video_url` part (a data: URI of any container FFmpeg reads, or
// file:// under --media-path), sampled to --video-frames frames. The answer and the prompt's
// token count equal `vlkv run --video` with the same frames (the CLI's video path is checked
// against references in tests/vision and tests/engine); a part that is no video, or bytes
// FFmpeg cannot read, is a 400 naming the part; the temporary file a data: URI's bytes go
// to is gone once the request ends, answered or refused.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "cli_util.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using namespace testing_serve;

std::string uri(const std::string& media_type, const std::string& bytes) {
  return "data:" + media_type + ";base64," +
         server::encode_base64(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string chat_with_video(const std::string& video_uri, const std::string& question) {
  nlohmann::json content = nlohmann::json::array();
  content.push_back({{"type", "video_url"}, {"video_url", {{"url", video_uri}}}});
  content.push_back({{"type", "text"}, {"text", question}});
  return nlohmann::json({{"messages", {{{"role", "user"}, {"content", content}}}},
                         {"max_tokens", 8},
                         {"temperature", 0}})
      .dump();
}

// The server's temporary video files (its log lands in the same folder: gtest's TempDir
// follows TMPDIR).
int files_in(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += std::string(e->d_name).rfind("vlkv_video_", 0) == 0;
    closedir(d);
  }
  return n;
}

class ServeVideo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = ::testing::TempDir() + "vlkv_video_tmp_" + std::to_string(getpid());
    ASSERT_EQ(std::system(("mkdir -p '" + tmp_ + "'").c_str()), 0);
    clip_ = ::testing::TempDir() + "vlkv_serve_video_" + std::to_string(getpid()) + ".mp4";
    ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i testsrc=size=48x32:rate=10 -frames:v 12 -c:v mpeg4 "
                           "-pix_fmt yuv420p '" + clip_ + "'").c_str()),
              0);
    setenv("TMPDIR", tmp_.c_str(), 1);  // the server inherits it: its temp files land here
    server_ = new ServerProcess({"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "1",
                                 "--video-frames", "2"});
    unsetenv("TMPDIR");
  }
  static void TearDownTestSuite() {
    delete server_;
    std::remove(clip_.c_str());
    (void)std::system(("rm -rf '" + tmp_ + "'").c_str());
  }
  void SetUp() override { ASSERT_TRUE(server_->running()) << server_->log(); }
  static ServerProcess* server_;
  static std::string tmp_, clip_;
};
ServerProcess* ServeVideo::server_ = nullptr;
std::string ServeVideo::tmp_, ServeVideo::clip_;

TEST_F(ServeVideo, AnswersAsVlkvRunWithTheSameFrames) {
  httplib::Client c = server_->client(60);
  HttpReply r = post(c, "/v1/chat/completions", chat_with_video(uri("video/mp4", read_file(clip_)), "Describe the image."));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string answer = r.json["choices"][0]["message"]["content"].get<std::string>();
  const testing_cli::CliResult run =
      testing_cli::run_cli({"run", "-m", model_path(), "--mmproj", mmproj_path(), "--video", clip_, "--frames", "2",
                            "-p", "Describe the image.", "--temp", "0", "-n", "8", "-t", "1", "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(answer + "\n", run.out);
  const testing_cli::CliResult count =
      testing_cli::run_cli({"run", "-m", model_path(), "--mmproj", mmproj_path(), "--video", clip_, "--frames", "2",
                            "-p", "Describe the image.", "--count-tokens"});
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(count.out, "prompt_tokens=" + std::to_string(r.json["usage"]["prompt_tokens"].get<int64_t>()) +
                           " visual_tokens=288\n");  // 2 frames x 144 (tinyvlm)
  EXPECT_EQ(files_in(tmp_), 0);
}

TEST_F(ServeVideo, WhatIsNoVideoIsRefusedNamingThePart) {
  httplib::Client c = server_->client(30);
  HttpReply r = post(c, "/v1/chat/completions", chat_with_video(uri("image/png", "x"), "What?"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("video 1: data: URI of type 'image/png' is not a video"), std::string::npos) << r.body;
  r = post(c, "/v1/chat/completions", chat_with_video(uri("video/mp4", std::string(4096, 'z')), "What?"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("video 1: "), std::string::npos) << r.body;
  r = post(c, "/v1/chat/completions", chat_with_video("file:///etc/passwd", "What?"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("--media-path"), std::string::npos) << r.body;
  EXPECT_EQ(files_in(tmp_), 0);
}

}  // namespace
}  // namespace vlkv
