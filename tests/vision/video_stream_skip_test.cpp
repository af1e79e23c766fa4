// VideoStream::skip_to (a resumed ingest's seek): after skipping to frame n the stream returns
// frame n - 1 and then the frames load_video returns from n on, pixel for pixel, for clips with
// keyframes every 4 frames (a seek decodes from the one before, not from the start), for
// sampling that repeats frames and runs past the last one, and when the caller refuses what
// the seek found (the clip is read again from its start). Clips from the ffmpeg tool.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "vlkv/media.h"

namespace vlkv {
namespace {

class VideoStreamSkip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    clip_ = ::testing::TempDir() + "vlkv_skip_clip_" + std::to_string(getpid()) + ".mp4";
    // 40 frames of the moving test pattern, 10 fps, a keyframe every 4 frames.
    const std::string cmd = "ffmpeg -loglevel error -y -f lavfi -i testsrc=size=48x32:rate=10 -frames:v 40 "
                            "-c:v mpeg4 -g 4 -pix_fmt yuv420p '" + clip_ + "' 2>/dev/null";
    made_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() { std::remove(clip_.c_str()); }
  static std::string clip_;
  static bool made_;
};
std::string VideoStreamSkip::clip_;
bool VideoStreamSkip::made_ = false;

TEST_F(VideoStreamSkip, SkippedStreamsGoOnWithTheFramesLoadVideoReturns) {
  ASSERT_TRUE(made_) << "the ffmpeg tool could not make the test clip";
  // Every frame; every other; a rate above the clip's (frames repeat, the last times lie past the
  // last frame's start: it serves them).
  for (const VideoSampling& s : {VideoSampling{0, 10}, VideoSampling{0, 5}, VideoSampling{0, 25}, VideoSampling{7, 0}}) {
    SCOPED_TRACE(std::to_string(s.n_frames) + " frames / " + std::to_string(s.fps) + " fps");
    Result<std::vector<Image>> whole = load_video(clip_, s);
    ASSERT_TRUE(whole.is_ok()) << whole.status().message();
    const int64_t n = static_cast<int64_t>(whole->size());
    for (int64_t to = 1; to <= n; to += (to < 4 ? 1 : 3)) {
      SCOPED_TRACE(to);
      Result<std::unique_ptr<VideoStream>> v = VideoStream::open(clip_, s);
      ASSERT_TRUE(v.is_ok()) << v.status().message();
      Result<Image> last = (*v)->skip_to(to);
      ASSERT_TRUE(last.is_ok()) << last.status().message();
      EXPECT_EQ(last->pixels, (*whole)[static_cast<size_t>(to - 1)].pixels);
      EXPECT_EQ((*v)->n_read(), to);
      for (int64_t i = to; i < n; ++i) {
        Result<Image> f = (*v)->next();
        ASSERT_TRUE(f.is_ok()) << f.status().message();
        EXPECT_EQ(f->pixels, (*whole)[static_cast<size_t>(i)].pixels) << "frame " << i;
      }
      EXPECT_FALSE((*v)->next().is_ok());
    }
  }
}

TEST_F(VideoStreamSkip, ASeekDecodesFromTheKeyframeBeforeNotFromTheStart) {
  ASSERT_TRUE(made_);
  Result<std::unique_ptr<VideoStream>> v = VideoStream::open(clip_, VideoSampling{0, 10});
  ASSERT_TRUE(v.is_ok());
  ASSERT_TRUE((*v)->skip_to(30).is_ok());
  // Frame 29 is 1 past the keyframe at 28: two frames decoded (the keyframe, 29), at most a
  // keyframe interval plus the decoder's delay; reading from the start decodes 30.
  EXPECT_LE((*v)->n_decoded(), 8);
  EXPECT_GE((*v)->n_decoded(), 2);
}

TEST_F(VideoStreamSkip, AFrameTheCallerRefusesIsLookedForFromTheStart) {
  ASSERT_TRUE(made_);
  const VideoSampling s{0, 10};
  Result<std::vector<Image>> whole = load_video(clip_, s);
  ASSERT_TRUE(whole.is_ok());
  int asked = 0;
  Result<std::unique_ptr<VideoStream>> v = VideoStream::open(clip_, s);
  ASSERT_TRUE(v.is_ok());
  Result<Image> last = (*v)->skip_to(21, [&](const Image&) { return ++asked > 1; });
  ASSERT_TRUE(last.is_ok()) << last.status().message();
  EXPECT_EQ(asked, 1) << "the seek's frame is asked about once; the one read from the start is returned as is";
  EXPECT_EQ(last->pixels, (*whole)[20].pixels);
  EXPECT_GE((*v)->n_decoded(), 21) << "read again from the start";
  for (size_t i = 21; i < whole->size(); ++i) {
    Result<Image> f = (*v)->next();
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ(f->pixels, (*whole)[i].pixels) << "frame " << i;
  }
  // Out of range, or after a frame was read: refused.
  Result<std::unique_ptr<VideoStream>> w = VideoStream::open(clip_, s);
  ASSERT_TRUE(w.is_ok());
  EXPECT_FALSE((*w)->skip_to(0).is_ok());
  EXPECT_FALSE((*w)->skip_to(static_cast<int64_t>(whole->size()) + 1).is_ok());
  ASSERT_TRUE((*w)->next().is_ok());
  EXPECT_FALSE((*w)->skip_to(3).is_ok());
}

}  // namespace
}  // namespace vlkv
