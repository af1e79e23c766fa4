// Image and video loading: good files decode to the right sizes; corrupt,
// truncated, empty, zero-sized and oversized inputs (a decompression bomb: a
// tiny PNG declaring a huge image) are clear errors; a bounded fuzz smoke feeds
// mutated PNG bytes to the decoder. The video clip is made at test time with
// the ffmpeg tool (Debian's ffmpeg package).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "vlkv/media.h"

namespace vlkv {
namespace {

std::string eval_image(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "/vlm/tinyvlm/images/%03d.png", i);
  return std::string(VLKV_TEST_DATA) + name;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A PNG signature, an IHDR chunk declaring width x height (RGB8), then an empty
// IDAT and IEND: 57 bytes that stbi_info accepts (CRCs are not checked).
std::vector<uint8_t> png_header(uint32_t width, uint32_t height) {
  std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t v : {width, height}) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
  }
  for (uint8_t v : {8, 2, 0, 0, 0, 0, 0, 0, 0}) b.push_back(v);  // depth, colour type, methods, CRC
  for (const char* type : {"IDAT", "IEND"}) {
    for (int i = 0; i < 4; ++i) b.push_back(0);  // length 0
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(type[i]));
    for (int i = 0; i < 4; ++i) b.push_back(0);  // CRC
  }
  return b;
}

TEST(ImageLoader, DecodesBundledPng) {
  Result<Image> img = load_image(eval_image(0));
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  EXPECT_EQ(img->width, 96);
  EXPECT_EQ(img->height, 96);
  EXPECT_TRUE(img->valid());
}

TEST(ImageLoader, MissingFileIsNotFound) {
  Result<Image> img = load_image("/nonexistent/picture.png");
  ASSERT_FALSE(img.is_ok());
  EXPECT_EQ(img.status().code(), StatusCode::kNotFound);
}

TEST(ImageLoader, CorruptTruncatedAndEmptyAreErrors) {
  const std::vector<uint8_t> png = read_bytes(eval_image(0));
  ASSERT_GT(png.size(), 200u);
  Result<Image> truncated = decode_image(png.data(), 120);
  EXPECT_FALSE(truncated.is_ok());
  std::vector<uint8_t> garbage(1000);
  std::mt19937 rng(1);
  for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng());
  Result<Image> bad = decode_image(garbage.data(), garbage.size());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidFile);
  EXPECT_NE(bad.status().message().find("not a readable image"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(decode_image(png.data(), 0).is_ok());
}

TEST(ImageLoader, DecompressionBombRejectedBeforeDecoding) {
  for (uint32_t side : {100000u, 60000u, 10000u}) {
    const std::vector<uint8_t> bomb = png_header(side, side);
    Result<Image> img = decode_image(bomb.data(), bomb.size());
    ASSERT_FALSE(img.is_ok()) << side;
    EXPECT_EQ(img.status().code(), StatusCode::kInvalidFile);
  }
  // Within stb's range, our limit is what rejects it, with the numbers in the message.
  const std::vector<uint8_t> bomb = png_header(10000, 10000);
  Result<Image> img = decode_image(bomb.data(), bomb.size());
  EXPECT_NE(img.status().message().find("10000x10000"), std::string::npos) << img.status().message();
  // A tighter limit rejects even an ordinary picture.
  MediaLimits tight;
  tight.max_pixels = 95 * 95;
  EXPECT_FALSE(load_image(eval_image(0), tight).is_ok());
  tight = MediaLimits{};
  tight.max_file_bytes = 100;
  EXPECT_FALSE(load_image(eval_image(0), tight).is_ok());
}

TEST(ImageLoader, ZeroDimensionsRejected) {
  for (auto [w, h] : {std::pair{0u, 10u}, std::pair{10u, 0u}, std::pair{0u, 0u}}) {
    const std::vector<uint8_t> png = png_header(w, h);
    EXPECT_FALSE(decode_image(png.data(), png.size()).is_ok()) << w << "x" << h;
  }
}

// Bounded fuzz smoke: 3000 mutations (bit flips, byte overwrites, truncation) of a
// real PNG; each must give a valid image or an error, never a crash or hang.
TEST(ImageLoader, FuzzSmokeMutatedPng) {
  const std::vector<uint8_t> png = read_bytes(eval_image(1));
  std::mt19937 rng(20251130);
  MediaLimits limits;
  limits.max_pixels = 1 << 20;
  int ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = png;
    const int n_mut = 1 + static_cast<int>(rng() % 8);
    for (int m = 0; m < n_mut; ++m) {
      const size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: b[at] = static_cast<uint8_t>(rng()); break;
        default: b.resize(std::max<size_t>(1, at)); break;
      }
    }
    Result<Image> img = decode_image(b.data(), b.size(), limits);
    if (img.is_ok()) {
      ++ok;
      ASSERT_TRUE(img->valid());
      ASSERT_LE(static_cast<int64_t>(img->width) * img->height, limits.max_pixels);
    }
  }
  std::printf("fuzz smoke: %d of 3000 mutated PNGs still decoded\n", ok);
}

class VideoLoader : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    clip_ = ::testing::TempDir() + "vlkv_test_clip_" + std::to_string(getpid()) + ".mp4";
    // 10 frames of FFmpeg's test pattern, 32x32 at 10 fps (1 s), MPEG-4 part 2 (built into libavcodec).
    const std::string cmd = "ffmpeg -loglevel error -y -f lavfi -i testsrc=size=32x32:rate=10 -frames:v 10 "
                            "-c:v mpeg4 -pix_fmt yuv420p '" + clip_ + "'";
    made_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { std::remove(clip_.c_str()); }
  static std::string clip_;
  static bool made_;
};
std::string VideoLoader::clip_;
bool VideoLoader::made_ = false;

TEST_F(VideoLoader, UniformFrameCount) {
  ASSERT_TRUE(made_) << "the ffmpeg tool could not make the test clip";
  for (int n : {10, 4, 1}) {
    VideoSampling s;
    s.n_frames = n;
    Result<std::vector<Image>> frames = load_video(clip_, s);
    ASSERT_TRUE(frames.is_ok()) << frames.status().message();
    ASSERT_EQ(frames->size(), static_cast<size_t>(n));
    for (const Image& f : *frames) {
      EXPECT_EQ(f.width, 32);
      EXPECT_EQ(f.height, 32);
      EXPECT_TRUE(f.valid());
    }
  }
  // All 10 frames are distinct pictures (the test pattern moves), in order.
  VideoSampling all;
  all.n_frames = 10;
  Result<std::vector<Image>> frames = load_video(clip_, all);
  ASSERT_TRUE(frames.is_ok());
  for (size_t i = 1; i < frames->size(); ++i) EXPECT_NE((*frames)[i].pixels, (*frames)[i - 1].pixels) << i;
}

// VideoStream: the frames load_video returns, one next() at a time, then an error; the plan is
// known at open (what streamed prompts lay out before any frame is decoded).
TEST_F(VideoLoader, StreamPullsTheSameFramesOneAtATime) {
  ASSERT_TRUE(made_);
  for (const VideoSampling& s : {VideoSampling{10, 0}, VideoSampling{4, 0}, VideoSampling{0, 5}, VideoSampling{0, 25}}) {
    SCOPED_TRACE(std::to_string(s.n_frames) + " frames / " + std::to_string(s.fps) + " fps");
    double rate = 0;
    Result<std::vector<Image>> whole = load_video(clip_, s, {}, &rate);
    ASSERT_TRUE(whole.is_ok()) << whole.status().message();
    Result<std::unique_ptr<VideoStream>> stream = VideoStream::open(clip_, s);
    ASSERT_TRUE(stream.is_ok()) << stream.status().message();
    VideoStream& v = **stream;
    EXPECT_EQ(v.info().n_frames, static_cast<int32_t>(whole->size()));
    EXPECT_EQ(v.info().width, 32);
    EXPECT_DOUBLE_EQ(v.info().fps, rate);
    for (size_t i = 0; i < whole->size(); ++i) {
      EXPECT_EQ(v.n_read(), static_cast<int64_t>(i));
      Result<Image> f = v.next();
      ASSERT_TRUE(f.is_ok()) << f.status().message();
      EXPECT_EQ(f->pixels, (*whole)[i].pixels) << "frame " << i;
    }
    Result<Image> past = v.next();
    ASSERT_FALSE(past.is_ok());
    EXPECT_NE(past.status().message().find("no frame left"), std::string::npos) << past.status().message();
  }
}

// No fixed frame ceiling by default (MediaLimits::max_frames 0), but a plan is bounded: an absurd
// rate is refused at open, before its sample times are allocated.
TEST_F(VideoLoader, NoFixedCeilingButABoundedPlan) {
  ASSERT_TRUE(made_);
  VideoSampling many;
  many.fps = 2000;  // 2,000 frames from a 1 s clip (the last frame serves the times past it)
  Result<std::unique_ptr<VideoStream>> ok = VideoStream::open(clip_, many);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ((*ok)->info().n_frames, 2000);
  VideoSampling absurd;
  absurd.fps = 1e9;
  Result<std::unique_ptr<VideoStream>> refused = VideoStream::open(clip_, absurd);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("are planned"), std::string::npos) << refused.status().message();
}

TEST_F(VideoLoader, FpsSampling) {
  ASSERT_TRUE(made_);
  VideoSampling s;
  s.fps = 5;
  Result<std::vector<Image>> frames = load_video(clip_, s);
  ASSERT_TRUE(frames.is_ok()) << frames.status().message();
  EXPECT_EQ(frames->size(), 5u);
}

// Images and videos pass the same file checks (media_file_size), each naming its kind.
TEST_F(VideoLoader, FileChecksMatchImages) {
  ASSERT_TRUE(made_);
  MediaLimits tight;
  tight.max_file_bytes = 100;
  Result<Image> img = load_image(eval_image(0), tight);
  ASSERT_FALSE(img.is_ok());
  EXPECT_EQ(img.status().code(), StatusCode::kInvalidFile);
  EXPECT_NE(img.status().message().find("image file of "), std::string::npos) << img.status().message();
  EXPECT_NE(img.status().message().find("exceeds the limit of 100"), std::string::npos) << img.status().message();
  VideoSampling two;
  two.n_frames = 2;
  Result<std::vector<Image>> video = load_video(clip_, two, tight);
  ASSERT_FALSE(video.is_ok());
  EXPECT_EQ(video.status().code(), StatusCode::kInvalidFile);
  EXPECT_NE(video.status().message().find("video file of "), std::string::npos) << video.status().message();
  EXPECT_NE(video.status().message().find("exceeds the limit of 100"), std::string::npos) << video.status().message();
  // A folder is neither.
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(load_image(dir).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(load_video(dir, two).status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(load_video(dir, two).status().message().find("not a regular file"), std::string::npos);
}

TEST_F(VideoLoader, LimitsAndBadInput) {
  ASSERT_TRUE(made_);
  VideoSampling s;
  s.n_frames = 10;
  MediaLimits few;
  few.max_frames = 4;
  EXPECT_EQ(load_video(clip_, s, few).status().code(), StatusCode::kInvalidArgument);
  MediaLimits small;
  small.max_pixels = 16 * 16;
  EXPECT_EQ(load_video(clip_, s, small).status().code(), StatusCode::kInvalidFile);
  VideoSampling both;
  both.n_frames = 2;
  both.fps = 1;
  EXPECT_FALSE(load_video(clip_, both).is_ok());
  EXPECT_EQ(load_video("/nonexistent/clip.mp4", s).status().code(), StatusCode::kNotFound);

  // Truncated and garbage files.
  const std::vector<uint8_t> bytes = read_bytes(clip_);
  const std::string cut = clip_ + ".cut.mp4";
  {
    std::ofstream f(cut, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size() / 3));
  }
  Result<std::vector<Image>> truncated = load_video(cut, s);
  EXPECT_FALSE(truncated.is_ok());
  {
    std::ofstream f(cut, std::ios::binary);
    std::mt19937 rng(3);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>(rng()));
  }
  EXPECT_FALSE(load_video(cut, s).is_ok());
  // An image is not a video, and a video is not an image.
  EXPECT_FALSE(load_image(clip_).is_ok());
  std::remove(cut.c_str());
}

}  // namespace
}  // namespace vlkv
