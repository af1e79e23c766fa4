// probe_image / probe_video (issue 22 item 6): sizes and sample counts from headers alone,
// equal to what decoding gives, in every still format stb_image reads and for a video's
// sampling (--frames and --fps), with the decoders' errors; a hostile header is refused at
// once without allocating its pixels.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "vlkv/media.h"
#include "zero_png.h"

namespace vlkv {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

class MediaProbe : public ::testing::Test {
 protected:
  // Still images of odd sizes in each container (FFmpeg's test pattern) and two clips.
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "vlkv_probe_" + std::to_string(getpid()) + "/";
    std::string cmd = "mkdir -p '" + dir_ + "'";
    made_ = std::system(cmd.c_str()) == 0;
    auto run = [&](const std::string& c) { made_ = made_ && std::system(("ffmpeg -loglevel error -y " + c).c_str()) == 0; };
    for (const char* f : {"a.png", "b.jpg", "c.bmp", "d.gif", "e.ppm", "f.tga"})
      run("-f lavfi -i testsrc=size=37x13:rate=1 -frames:v 1 '" + dir_ + f + "'");
    run("-f lavfi -i testsrc=size=9x31:rate=1 -frames:v 1 -pix_fmt gray '" + dir_ + "g.png'");
    run("-f lavfi -i testsrc=size=48x20:rate=10 -frames:v 25 -c:v mpeg4 -pix_fmt yuv420p '" + dir_ + "clip.mp4'");
    run("-f lavfi -i testsrc=size=30x18:rate=8 -frames:v 12 -c:v mjpeg -pix_fmt yuvj420p '" + dir_ + "clip.avi'");
  }
  static void TearDownTestSuite() { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }
  void SetUp() override { ASSERT_TRUE(made_) << "the ffmpeg tool could not make the test media"; }
  static std::string dir_;
  static bool made_;
};
std::string MediaProbe::dir_;
bool MediaProbe::made_ = false;

TEST_F(MediaProbe, ImageSizeFromTheHeaderEqualsTheDecodedSize) {
  for (const char* f : {"a.png", "b.jpg", "c.bmp", "d.gif", "e.ppm", "f.tga", "g.png"}) {
    SCOPED_TRACE(f);
    const std::string path = dir_ + f;
    Result<MediaInfo> info = probe_image(path);
    ASSERT_TRUE(info.is_ok()) << info.status().message();
    Result<Image> img = load_image(path);
    ASSERT_TRUE(img.is_ok()) << img.status().message();
    EXPECT_EQ(info->width, img->width);
    EXPECT_EQ(info->height, img->height);
    EXPECT_FALSE(info->is_video);
    const std::vector<uint8_t> bytes = read_bytes(path);
    Result<MediaInfo> mem = probe_image_data(bytes.data(), bytes.size());
    ASSERT_TRUE(mem.is_ok());
    EXPECT_EQ(mem->width, img->width);
    EXPECT_EQ(mem->height, img->height);
  }
}

TEST_F(MediaProbe, BadImagesGetTheDecodersErrors) {
  EXPECT_EQ(probe_image(dir_ + "missing.png").status().code(), StatusCode::kNotFound);
  const std::vector<uint8_t> junk = {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'};
  EXPECT_EQ(probe_image_data(junk.data(), junk.size()).status().code(), StatusCode::kInvalidFile);
  EXPECT_EQ(probe_image_data(junk.data(), 0).status().code(), StatusCode::kInvalidFile);
  // Over the pixel limit: the same refusal as decode_image.
  const std::vector<uint8_t> png = test_png::zero_png(300, 200);
  MediaLimits small;
  small.max_pixels = 300 * 200 - 1;
  Result<MediaInfo> over = probe_image_data(png.data(), png.size(), small);
  Result<Image> decoded = decode_image(png.data(), png.size(), small);
  ASSERT_FALSE(over.is_ok());
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(over.status().message(), decoded.status().message());
  // Within it: the zero PNG helper itself decodes to its size (so the server probe's
  // images really are 8192 x 8192 once decoded).
  Result<Image> ok = decode_image(png.data(), png.size());
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(ok->width, 300);
  EXPECT_EQ(ok->height, 200);
}

// A 60000 x 60000 header (and an 8192 x 8192 one within the limits) costs the probe no pixel
// memory and well under a second.
TEST_F(MediaProbe, HostileHeadersAreReadWithoutAllocatingPixels) {
  const std::vector<uint8_t> hostile = test_png::zero_png(60000, 60000, /*data_rows=*/2);
  const auto t0 = Clock::now();
  Result<MediaInfo> refused = probe_image_data(hostile.data(), hostile.size());
  Result<Image> not_decoded = decode_image(hostile.data(), hostile.size());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 0.25);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("60000x60000"), std::string::npos) << refused.status().message();
  ASSERT_FALSE(not_decoded.is_ok());

  const std::vector<uint8_t> big = test_png::zero_png(8192, 8192);  // ~410 KB
  EXPECT_LT(big.size(), 600u << 10);
  const long rss0 = peak_rss_kb();
  const auto t1 = Clock::now();
  Result<MediaInfo> info = probe_image_data(big.data(), big.size());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t1).count(), 0.25);
  ASSERT_TRUE(info.is_ok()) << info.status().message();
  EXPECT_EQ(info->width, 8192);
  EXPECT_EQ(info->height, 8192);
  EXPECT_LT(peak_rss_kb() - rss0, 16 * 1024);  // the pixels would be 64 MiB (grey) or 192 MiB (RGB)
}

// A video's plan without a decoded frame: the stream's size, and as many samples as
// load_video returns for --frames and --fps, with its rate.
TEST_F(MediaProbe, VideoPlanEqualsTheDecodedFrames) {
  for (const char* f : {"clip.mp4", "clip.avi"}) {
    const std::string path = dir_ + f;
    std::vector<VideoSampling> samplings;
    for (int n : {1, 4, 7, 12}) samplings.push_back(VideoSampling{n, 0});
    for (double fps : {0.5, 1.0, 3.0, 10.0}) samplings.push_back(VideoSampling{0, fps});
    for (const VideoSampling& s : samplings) {
      SCOPED_TRACE(std::string(f) + " frames " + std::to_string(s.n_frames) + " fps " + std::to_string(s.fps));
      Result<MediaInfo> info = probe_video(path, s);
      double rate = 0;
      Result<std::vector<Image>> frames = load_video(path, s, {}, &rate);
      ASSERT_TRUE(info.is_ok()) << info.status().message();
      ASSERT_TRUE(frames.is_ok()) << frames.status().message();
      EXPECT_TRUE(info->is_video);
      EXPECT_EQ(info->n_frames, static_cast<int32_t>(frames->size()));
      EXPECT_DOUBLE_EQ(info->fps, rate);
      for (const Image& img : *frames) {
        EXPECT_EQ(img.width, info->width);
        EXPECT_EQ(img.height, info->height);
      }
    }
  }
  // The sampler's refusals, before any frame.
  MediaLimits few;
  few.max_frames = 4;
  EXPECT_EQ(probe_video(dir_ + "clip.mp4", VideoSampling{10, 0}, few).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(probe_video(dir_ + "clip.mp4", VideoSampling{0, 100}, few).status().code(), StatusCode::kInvalidArgument);
  MediaLimits small;
  small.max_pixels = 16 * 16;
  EXPECT_EQ(probe_video(dir_ + "clip.mp4", VideoSampling{2, 0}, small).status().code(), StatusCode::kInvalidFile);
  EXPECT_EQ(probe_video(dir_ + "nope.mp4", VideoSampling{2, 0}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(probe_video(dir_ + "a.png", VideoSampling{2, 0}).status().code() == StatusCode::kOk, false);
}

}  // namespace
}  // namespace vlkv
