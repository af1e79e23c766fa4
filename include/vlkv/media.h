// Images and video frames as the public API takes them: decoded RGB8 pixels,
// loaded from files or memory under limits that bound what hostile input can
// make us allocate. Decoding lives in src/vision (stb_image, FFmpeg).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vlkv/status.h"

namespace vlkv {

// One RGB8 picture, rows top to bottom, 3 bytes per pixel.
struct Image {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> pixels;  // [height, width, 3] R, G, B

  bool valid() const {
    return width > 0 && height > 0 && pixels.size() == static_cast<size_t>(width) * height * 3;
  }
};

// The most sample times one video's plan may hold when MediaLimits::max_frames is 0 (an hour
// at 1,000 fps): bounds what an absurd --fps makes us allocate before the context refuses it.
inline constexpr int64_t kMaxPlannedFrames = 1 << 22;

// Limits against hostile media; a file beyond any of them is rejected before
// its pixels are decoded (the header's dimensions are read first).
struct MediaLimits {
  uint64_t max_file_bytes = 256ull << 20;  // 256 MiB per image or video file
  int64_t max_pixels = 64ll << 20;         // width * height of one image or frame (~8K x 8K)
  int32_t max_side = 16384;                // longest side of one image or frame, pixels
  // Frames taken from one video; 0: no fixed limit (a prompt's video is bounded by the context,
  // each frame being at least one token: Engine::count_prompt_tokens; a plan by
  // kMaxPlannedFrames). A streamed video holds one frame at a time whatever its length.
  int32_t max_frames = 0;
};

// Decodes PNG, JPEG, BMP, GIF (first frame), TGA, PSD, PNM, HDR (tone-mapped) images.
Result<Image> load_image(const std::string& path, const MediaLimits& limits = {});
Result<Image> decode_image(const uint8_t* data, size_t size, const MediaLimits& limits = {});

// What a file's header says before any pixel is decoded (probe_image, probe_video): enough
// to count the visual tokens a model makes of it (Engine::count_prompt_tokens) and refuse an
// over-long request at once. The sizes are checked against MediaLimits as decoding does.
struct MediaInfo {
  int32_t width = 0;     // of the image, or of the video's frames (its stream's coded size)
  int32_t height = 0;
  int32_t n_frames = 1;  // video: the frames the sampling takes (load_video returns as many)
  double fps = 0;        // video: samples per second of stream time, as load_video's frame_rate
  bool is_video = false;
};

// The dimensions from the header alone (stb_image's info, behind the same guards as decoding):
// what decode_image would return for the data, or its error, without decoding a pixel.
// The file is read whole (under max_file_bytes): JPEG frame headers may follow long segments.
Result<MediaInfo> probe_image(const std::string& path, const MediaLimits& limits = {});
Result<MediaInfo> probe_image_data(const uint8_t* data, size_t size, const MediaLimits& limits = {});

// Uniform frame sampling: exactly one of n_frames (spread evenly over the whole
// clip) or fps (one frame every 1/fps seconds of stream time) is > 0.
struct VideoSampling {
  int32_t n_frames = 0;
  double fps = 0;
};

// A video's sampled frames one at a time, as RGB8, decoded as they are asked for: what a
// streamed prompt (MediaItem::stream) feeds its encoder from, holding one frame at a time
// instead of the whole clip. open() reads the container and plans the sample times (the
// same plan and errors as load_video, the same frames in the same order).
class VideoStream {
 public:
  static Result<std::unique_ptr<VideoStream>> open(const std::string& path, const VideoSampling& sampling,
                                                   const MediaLimits& limits = {});
  ~VideoStream();
  VideoStream(const VideoStream&) = delete;
  VideoStream& operator=(const VideoStream&) = delete;

  // The frames' size, how many the plan takes (n_frames) and their rate (fps).
  const MediaInfo& info() const;
  // The next frame; an error for a corrupt stream or past info().n_frames.
  Result<Image> next();
  // Frames next() has returned (or skip_to passed).
  int64_t n_read() const;
  // Before the first next(): makes frame n (1..n_frames) the next one without decoding what
  // lies before the keyframe preceding frame n - 1 or converting any frame but that one, which
  // is returned (a resumed ingest checks it against the frame it had fed). Where accept refuses
  // the frame the seek found, or the seek fails, the clip is read again from the start as
  // next() reads it (decoded, not converted) and frame n - 1 is what that gives.
  Result<Image> skip_to(int64_t n, const std::function<bool(const Image&)>& accept = {});
  // Frames the decoder has produced (taken or passed over): what a skip cost.
  int64_t n_decoded() const;

 private:
  struct Impl;
  explicit VideoStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decodes a video file's best video stream and returns the sampled frames as
// RGB8 (at most limits.max_frames; more requested frames is an InvalidArgument).
// frame_rate (optional): the sampled frames per second of stream time (sampling.fps, or
// n_frames over the clip's duration), which Qwen2.5-VL's temporal positions need.
Result<std::vector<Image>> load_video(const std::string& path, const VideoSampling& sampling,
                                      const MediaLimits& limits = {}, double* frame_rate = nullptr);

// load_video's plan without decoding a frame: the container's stream size, duration and the
// sample times (libavformat's stream info only; avformat_find_stream_info may read the first
// packets). The same errors as load_video for a bad file, sampling or limit.
Result<MediaInfo> probe_video(const std::string& path, const VideoSampling& sampling, const MediaLimits& limits = {});

}  // namespace vlkv
