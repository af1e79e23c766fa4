// Videos in chat requests: a `video_url` part (a data: URI of any container FFmpeg reads, or
// file:// under --media-path), sampled to --video-frames frames. The answer and the prompt's
// token count equal `vlkv run --video` with the same frames (the CLI's video path is checked
// against references in tests/vision and tests/engine); a part that is no video, or bytes
// FFmpeg cannot read, is a 400 naming the part; the temporary file a data: URI's bytes go
// to is gone once the request ends, answered or refused.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "cli_util.h"
#include "serve_raw.h"
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
    server_ = start_server(Rss::kAsIs).release();
  }
  // A server whose temporary files land in tmp_ (it inherits TMPDIR).
  static std::unique_ptr<ServerProcess> start_server(Rss rss) {
    setenv("TMPDIR", tmp_.c_str(), 1);
    auto server = std::make_unique<ServerProcess>(
        std::vector<std::string>{"-m", model_path(), "--mmproj", mmproj_path(), "-t", "1", "-np", "1", "--video-frames", "2"},
        rss);
    unsetenv("TMPDIR");
    return server;
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


// Issue 38: a 199 KB H.264 clip of 8200x8200 frames (over the 64 Mi pixel limit) took ~150 MB
// in the probe, which decoded frames (avformat_find_stream_info) before the size was checked,
// and 16 at once 2.56 GB. Its MP4 header says the size: refused from it, no decoder opened.
// As a raw H.264 stream (no container header) the probe's decoders refuse frames over the
// limit unallocated (max_pixels), and probes run a few at a time.
TEST_F(ServeVideo, HugeFramesRefusedFromTheHeaderCheaply) {
  const std::string mp4 = tmp_ + "/huge.mp4", h264 = tmp_ + "/huge.h264";
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i color=black:size=8200x8200:rate=2 -frames:v 1 "
                         "-c:v libx264 -preset ultrafast -pix_fmt yuv420p '" + mp4 + "' && ffmpeg -loglevel error -y "
                         "-i '" + mp4 + "' -c copy -bsf:v h264_mp4toannexb '" + h264 + "'").c_str()),
            0);
  const std::string mp4_body = chat_with_video(uri("video/mp4", read_file(mp4)), "What?");
  const std::string h264_body = chat_with_video(uri("video/h264", read_file(h264)), "What?");
  std::remove(mp4.c_str());
  std::remove(h264.c_str());
  // Its own server, whose allocator returns what is freed (Rss::kHonest: under ASan the
  // quarantine would hold every freed probe buffer and the peak would measure that).
  const std::unique_ptr<ServerProcess> server = start_server(Rss::kHonest);
  ASSERT_TRUE(server->running()) << server->log();
  httplib::Client c = server->client(60);
  for (const std::string* body : {&mp4_body, &h264_body}) {
    SCOPED_TRACE(body == &mp4_body ? "mp4" : "h264");
    (void)post(c, "/v1/chat/completions", *body);  // warm (FFmpeg's tables, the body's buffers)
    const uint64_t before = resident_bytes(server->pid());
    ASSERT_TRUE(reset_peak(server->pid()));
    const auto t0 = std::chrono::steady_clock::now();
    HttpReply r = post(c, "/v1/chat/completions", *body);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t peak = peak_bytes(server->pid());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("8200x8200"), std::string::npos) << r.body;
    EXPECT_LT(seconds, 1.0);
    EXPECT_LT(peak, before + (64u << 20)) << before << " -> peak " << peak;  // measured +0 (mp4), +25 MiB (h264)
  }
  // 16 at once (the mp4 refused from its header, so the raw stream's probe is the costly one).
  const uint64_t before = resident_bytes(server->pid());
  ASSERT_TRUE(reset_peak(server->pid()));
  std::vector<std::thread> clients;
  std::vector<int> statuses(16, 0);
  for (size_t i = 0; i < statuses.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client ci = server->client(60);
      statuses[i] = post(ci, "/v1/chat/completions", h264_body).status;
    });
  for (std::thread& t : clients) t.join();
  for (int s : statuses) EXPECT_EQ(s, 400);
  const uint64_t peak = peak_bytes(server->pid());
  // Two probes at a time, ~25 MiB each (the H.264 decoder's tables), and 16 bodies: measured
  // +75 MiB (2.56 GB before; four probes at a time measured +148 MiB).
  EXPECT_LT(peak, before + (128u << 20)) << before << " -> peak " << peak;
  EXPECT_EQ(files_in(tmp_), 0);
}

// What FFmpeg cannot read is refused naming the part, never the temporary file the bytes
// went to (the server's folder layout is not the client's business).
TEST_F(ServeVideo, ErrorsNameNoTemporaryFile) {
  httplib::Client c = server_->client(30);
  HttpReply r = post(c, "/v1/chat/completions", chat_with_video(uri("video/mp4", std::string(4096, 'z')), "What?"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.find("vlkv_video_"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find(tmp_), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("video 1: the video_url data: "), std::string::npos) << r.body;
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

// --video-fps: a model trained at one frame rate (tinyvideo at 2, its time labels from it) gets
// every uploaded clip sampled at that rate, so the page and the API lay a clip out as
// `vlkv run --video --fps 2` does: the same prompt tokens and the same answer.
TEST(ServeVideoFps, TinyvideoAtItsRateAnswersAsRun) {
  const std::string clip = ::testing::TempDir() + "vlkv_serve_fps_" + std::to_string(getpid()) + ".mp4";
  ASSERT_EQ(std::system(("ffmpeg -loglevel error -y -f lavfi -i testsrc=size=64x64:rate=4 -frames:v 16 -c:v mpeg4 "
                         "-pix_fmt yuv420p '" + clip + "'").c_str()),
            0);  // 4 s: 8 frames at 2 fps
  const std::string model = std::string(VLKV_SOURCE_DIR) + "/models/tinyvideo.gguf";
  const std::string mmproj = std::string(VLKV_SOURCE_DIR) + "/models/tinyvideo-mmproj.gguf";
  ServerProcess server({"-m", model, "--mmproj", mmproj, "-t", "1", "-np", "1", "--video-fps", "2"});
  ASSERT_TRUE(server.running()) << server.log();
  httplib::Client c = server.client(60);
  const std::string question = "What colour was the first shape?";
  HttpReply r = post(c, "/v1/chat/completions", chat_with_video(uri("video/mp4", read_file(clip)), question));
  ASSERT_EQ(r.status, 200) << r.body;
  const testing_cli::CliResult run =
      testing_cli::run_cli({"run", "-m", model, "--mmproj", mmproj, "--video", clip, "--fps", "2", "-p", question,
                            "--temp", "0", "-n", "8", "-t", "1", "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(r.json["choices"][0]["message"]["content"].get<std::string>() + "\n", run.out);
  const testing_cli::CliResult count = testing_cli::run_cli(
      {"run", "-m", model, "--mmproj", mmproj, "--video", clip, "--fps", "2", "-p", question, "--count-tokens"});
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(count.out, "prompt_tokens=" + std::to_string(r.json["usage"]["prompt_tokens"].get<int64_t>()) +
                           " visual_tokens=128\n");  // 8 frames x 16 (tinyvideo)
  EXPECT_EQ(server.stop(), 0);
  std::remove(clip.c_str());
}

}  // namespace
}  // namespace vlkv
