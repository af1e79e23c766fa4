// Video frames through FFmpeg's libraries (libavformat demuxes, libavcodec
// decodes, libswscale converts straight to RGB24). Frames are sampled uniformly
// in stream time: n_frames evenly over the clip, or one every 1/fps seconds;
// each sample takes the first decoded frame at or after its time (the last frame
// for times past it), so a plan of N times gives N frames. Frames are pulled one at
// a time (VideoStream): load_video collects them, a streamed prompt holds one.
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <semaphore>
#include <vector>

#include "vision/image.h"
#include "vision/media_file.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

namespace vlkv {
namespace {

std::string av_error(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

struct FormatCloser { void operator()(AVFormatContext* c) const { avformat_close_input(&c); } };
struct CodecFreer { void operator()(AVCodecContext* c) const { avcodec_free_context(&c); } };
struct FrameFreer { void operator()(AVFrame* f) const { av_frame_free(&f); } };
struct PacketFreer { void operator()(AVPacket* p) const { av_packet_free(&p); } };
struct SwsFreer { void operator()(SwsContext* s) const { sws_freeContext(s); } };

class FrameSampler {
 public:
  FrameSampler(const std::string& path, const MediaLimits& limits) : path_(path), limits_(limits) {}

  // Sample times per second of stream time (valid after run).
  double rate() const { return rate_; }

  // The container's stream and the sample times, no frame decoded (probe_video).
  Result<MediaInfo> probe(const VideoSampling& sampling) {
    VLKV_RETURN_IF_ERROR(open_container());
    VLKV_RETURN_IF_ERROR(plan(sampling));
    MediaInfo info;
    info.width = width_;
    info.height = height_;
    info.n_frames = static_cast<int32_t>(targets_.size());
    info.fps = rate_;
    info.is_video = true;
    return info;
  }

  // Opens the container and the decoder for next().
  Status start(const VideoSampling& sampling) {
    sampling_ = sampling;
    VLKV_RETURN_IF_ERROR(open_container());
    VLKV_RETURN_IF_ERROR(plan(sampling));
    VLKV_RETURN_IF_ERROR(open_decoder());
    pkt_.reset(av_packet_alloc());
    frame_.reset(av_frame_alloc());
    if (!pkt_ || !frame_) return out_of_memory("cannot allocate FFmpeg buffers");
    return Status::ok();
  }

  int64_t n_planned() const { return static_cast<int64_t>(targets_.size()); }
  int64_t n_served() const { return served_; }
  int32_t width() const { return width_; }
  int32_t height() const { return height_; }

  // The next sampled frame: decodes packets until a frame serves the next sample time. A
  // decoded frame serving several times is handed out once per time.
  Result<Image> next() {
    VLKV_RETURN_IF_ERROR(advance());
    return last_;  // a copy: last_ may serve the next sample times too
  }

  // Frames decoded so far (taken or passed over), for tests of what a skip costs.
  int64_t n_decoded() const { return decoded_; }

  // Makes sample n the next one, returning sample n - 1 for the caller to check: a seek to the
  // keyframe before its time and a decode from there, converting only the frame that serves it.
  // Where the caller does not accept that frame (a seek that is not frame exact) or it cannot be
  // found so (its time is past the last frame, which an earlier frame then serves), the clip is
  // read again from its start, decoding but converting none of the frames before.
  Result<Image> skip_to(int64_t n, const std::function<bool(const Image&)>& accept) {
    if (n < 1 || n > n_planned())
      return invalid_argument(path_ + ": cannot skip to frame " + std::to_string(n) + " of " +
                              std::to_string(n_planned()));
    if (served_ != 0) return invalid_argument(path_ + ": a stream is skipped only before its first frame");
    const int64_t ts = static_cast<int64_t>(std::floor((targets_[static_cast<size_t>(n - 1)] - 1e-3) / time_base_));
    if (av_seek_frame(fmt_.get(), stream_, ts, AVSEEK_FLAG_BACKWARD) >= 0) {
      avcodec_flush_buffers(dec_.get());
      eof_ = false;
      next_ = static_cast<size_t>(n - 1);
      served_ = n - 1;
      pending_ = 0;
      last_ = Image{};
      Result<Image> frame = next();
      if (frame.is_ok() && (!accept || accept(*frame))) return frame;
    }
    // From the start again, as the uninterrupted stream read it.
    fmt_.reset();
    dec_.reset();
    targets_.clear();
    next_ = 0;
    served_ = 0;
    pending_ = 0;
    eof_ = false;
    last_ = Image{};
    VLKV_RETURN_IF_ERROR(start(sampling_));
    convert_from_ = static_cast<size_t>(n - 1);
    for (int64_t i = 0; i + 1 < n; ++i) VLKV_RETURN_IF_ERROR(advance());
    convert_from_ = 0;
    Result<Image> frame = next();
    held_.reset();
    return frame;
  }

 private:
  // One sample time served: last_ is its frame.
  Status advance() {
    if (served_ >= n_planned())
      return invalid_argument(path_ + ": no frame left (" + std::to_string(n_planned()) + " planned)");
    while (pending_ == 0 && !done()) {
      // Frames the decoder holds first: a packet is sent only once it asks for input.
      VLKV_RETURN_IF_ERROR(drain());
      if (pending_ > 0 || done()) break;
      if (!eof_) {
        VLKV_RETURN_IF_ERROR(send_next_packet());
        continue;
      }
      // Sample times after the last frame's start (the clip's duration runs past it): the
      // last frame is the one shown then and serves them, so every plan is filled and
      // probe_video's count is the frames returned. (A skip holds that frame unconverted.)
      if (!last_.valid() && held_) VLKV_RETURN_IF_ERROR(convert(held_.get()));
      if (!last_.valid()) return invalid_file(path_ + ": no video frame could be decoded");
      ++pending_;
      ++next_;
    }
    --pending_;
    ++served_;
    return Status::ok();
  }

  // One packet of the video stream to the decoder; at the end, the decoder's flush.
  Status send_next_packet() {
    for (;;) {
      const int rc = av_read_frame(fmt_.get(), pkt_.get());
      if (rc == AVERROR_EOF) {
        eof_ = true;
        avcodec_send_packet(dec_.get(), nullptr);  // its delayed frames come out in drain()
        return Status::ok();
      }
      if (rc < 0) return invalid_file(path_ + ": cannot read the video (" + av_error(rc) + ")");
      if (pkt_->stream_index != stream_) {
        av_packet_unref(pkt_.get());
        continue;
      }
      const int sent = avcodec_send_packet(dec_.get(), pkt_.get());
      av_packet_unref(pkt_.get());
      if (sent < 0 && sent != AVERROR(EAGAIN)) return invalid_file(path_ + ": corrupt video data (" + av_error(sent) + ")");
      return Status::ok();
    }
  }

  // Demuxer, stream info and the best video stream; its size and duration.
  Status open_container() {
    VLKV_RETURN_IF_ERROR(media_file_size(path_, "video", limits_).status());
    av_log_set_level(AV_LOG_QUIET);  // errors come back as Status, not on stderr
    AVFormatContext* raw = nullptr;
    int rc = avformat_open_input(&raw, path_.c_str(), nullptr, nullptr);
    if (rc < 0) return invalid_file(path_ + ": not a readable video (" + av_error(rc) + ")");
    fmt_.reset(raw);
    // Sizes the container's header declares (MP4, Matroska, AVI: most) are checked before
    // avformat_find_stream_info, which opens decoders and decodes frames at that size.
    for (unsigned i = 0; i < fmt_->nb_streams; ++i) {
      const AVStream* s = fmt_->streams[i];
      if (s->codecpar->codec_type != AVMEDIA_TYPE_VIDEO || (s->disposition & AV_DISPOSITION_ATTACHED_PIC)) continue;
      if (s->codecpar->width > 0 && s->codecpar->height > 0)
        VLKV_RETURN_IF_ERROR(check_dims(s->codecpar->width, s->codecpar->height));
    }
    // Where only the stream says its size (a raw H.264 stream), the decoders it opens refuse
    // frames over the pixel limit before allocating them (max_pixels).
    std::vector<AVDictionary*> opts(fmt_->nb_streams, nullptr);
    for (AVDictionary*& d : opts) {
      av_dict_set_int(&d, "max_pixels", limits_.max_pixels, 0);
      av_dict_set(&d, "threads", "1", 0);
    }
    rc = avformat_find_stream_info(fmt_.get(), opts.empty() ? nullptr : opts.data());
    for (AVDictionary*& d : opts) av_dict_free(&d);
    if (rc < 0) return invalid_file(path_ + ": cannot read stream info (" + av_error(rc) + ")");
    const AVCodec* codec = nullptr;
    stream_ = av_find_best_stream(fmt_.get(), AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (stream_ < 0 || !codec) return invalid_file(path_ + ": no decodable video stream");
    AVStream* s = fmt_->streams[stream_];
    VLKV_RETURN_IF_ERROR(check_dims(s->codecpar->width, s->codecpar->height));
    width_ = s->codecpar->width;
    height_ = s->codecpar->height;
    codec_ = codec;
    time_base_ = av_q2d(s->time_base);
    start_ = s->start_time != AV_NOPTS_VALUE ? s->start_time * time_base_ : 0.0;
    if (s->duration != AV_NOPTS_VALUE && s->duration > 0) duration_ = s->duration * time_base_;
    else if (fmt_->duration > 0) duration_ = static_cast<double>(fmt_->duration) / AV_TIME_BASE;
    return Status::ok();
  }

  Status open_decoder() {
    const AVStream* s = fmt_->streams[stream_];
    const AVCodec* codec = codec_;
    dec_.reset(avcodec_alloc_context3(codec));
    if (!dec_) return out_of_memory("cannot allocate a video decoder");
    int rc = avcodec_parameters_to_context(dec_.get(), s->codecpar);
    if (rc < 0) return invalid_file(path_ + ": bad codec parameters (" + av_error(rc) + ")");
    dec_->thread_count = 1;
    dec_->max_pixels = limits_.max_pixels;  // a frame bigger than the stream's header said is refused unallocated
    rc = avcodec_open2(dec_.get(), codec, nullptr);
    if (rc < 0) return invalid_file(path_ + ": cannot open the video decoder (" + av_error(rc) + ")");
    return Status::ok();
  }

  Status check_dims(int64_t w, int64_t h) const {
    if (w <= 0 || h <= 0) return invalid_file(path_ + ": video frames have no pixels");
    if (w > limits_.max_side || h > limits_.max_side || w * h > limits_.max_pixels) {
      return invalid_file(path_ + ": video frames of " + std::to_string(w) + "x" + std::to_string(h) +
                          " pixels exceed the limit");
    }
    return Status::ok();
  }

  // Sample times in seconds of stream time.
  Status plan(const VideoSampling& s) {
    if ((s.n_frames > 0) == (s.fps > 0)) return invalid_argument("give exactly one of a frame count or a frame rate");
    if (s.n_frames < 0 || s.fps < 0 || !std::isfinite(s.fps)) return invalid_argument("bad frame sampling");
    if (duration_ <= 0) return invalid_file(path_ + ": the video's duration is unknown");
    const int64_t limit = limits_.max_frames > 0 ? limits_.max_frames : kMaxPlannedFrames;
    const std::string limit_text = limits_.max_frames > 0 ? "the limit is " + std::to_string(limit) + " (--max-frames)"
                                                          : "at most " + std::to_string(limit) + " are planned";
    if (s.n_frames > 0) {
      if (s.n_frames > limit) return invalid_argument(std::to_string(s.n_frames) + " frames requested; " + limit_text);
      for (int32_t i = 0; i < s.n_frames; ++i) targets_.push_back(start_ + duration_ * i / s.n_frames);
      rate_ = s.n_frames / duration_;
    } else {
      const double n = std::floor(duration_ * s.fps - 1e-9) + 1;
      if (n > static_cast<double>(limit)) {
        return invalid_argument("sampling at " + std::to_string(s.fps) + " fps gives " + std::to_string(int64_t(n)) +
                                " frames; " + limit_text);
      }
      for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) targets_.push_back(start_ + i / s.fps);
      rate_ = s.fps;
    }
    return Status::ok();
  }

  bool done() const { return next_ >= targets_.size(); }

  // Decodes until a frame serves sample times (counted in pending_; it is last_) or the
  // decoder needs input.
  Status drain() {
    AVFrame* frame = frame_.get();
    for (;;) {
      const int rc = avcodec_receive_frame(dec_.get(), frame);
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return Status::ok();
      if (rc < 0) return invalid_file(path_ + ": corrupt video frame (" + av_error(rc) + ")");
      const int64_t pts = frame->best_effort_timestamp;
      const double t = pts != AV_NOPTS_VALUE ? pts * time_base_ : targets_[next_];
      ++decoded_;
      // The first frame at or after a sample time serves it (1e-4 s slack for rounding).
      const size_t first = next_;
      while (!done() && targets_[next_] <= t + 1e-4) {
        ++pending_;
        ++next_;
      }
      if (next_ > first && next_ - 1 >= convert_from_) {
        VLKV_RETURN_IF_ERROR(convert(frame));
      } else if (next_ > first) {  // skipped: kept unconverted, in case it serves the times past the last frame
        if (!held_) held_.reset(av_frame_alloc());
        if (!held_) return out_of_memory("cannot allocate an FFmpeg frame");
        av_frame_unref(held_.get());
        if (av_frame_ref(held_.get(), frame) < 0) return out_of_memory("cannot keep a video frame");
      }
      av_frame_unref(frame);
      if (done() || pending_ > 0) return Status::ok();
    }
  }

  Status convert(const AVFrame* f) {
    VLKV_RETURN_IF_ERROR(check_dims(f->width, f->height));
    // Every frame at the stream's size (a frame of another size is scaled to it), so the
    // size probe_video reads from the container is every frame's and the token count holds.
    const int out_w = width_, out_h = height_;
    sws_.reset(sws_getCachedContext(sws_.release(), f->width, f->height, static_cast<AVPixelFormat>(f->format),
                                    out_w, out_h, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
    if (!sws_) return unsupported(path_ + ": cannot convert this pixel format to RGB");
    // libswscale's SIMD writes whole vectors: a row of out_w * 3 bytes (e.g. 90 for a 30-pixel
    // wide clip) gets up to a vector past its end, which overran a tightly packed image (found
    // by valgrind on a 30x18 MJPEG clip). It writes into padded rows, copied out packed.
    const size_t row = static_cast<size_t>(out_w) * 3;
    const size_t stride = (row + 63) / 64 * 64;
    scratch_.resize(stride * static_cast<size_t>(out_h) + 64);
    uint8_t* dst[4] = {scratch_.data(), nullptr, nullptr, nullptr};
    int dst_stride[4] = {static_cast<int>(stride), 0, 0, 0};
    const int rows = sws_scale(sws_.get(), f->data, f->linesize, 0, f->height, dst, dst_stride);
    if (rows != out_h) return invalid_file(path_ + ": frame conversion failed");
    Image img;
    img.width = out_w;
    img.height = out_h;
    img.pixels.resize(row * static_cast<size_t>(out_h));
    for (int y = 0; y < out_h; ++y) std::memcpy(&img.pixels[row * y], &scratch_[stride * y], row);
    last_ = std::move(img);
    return Status::ok();
  }

  std::string path_;
  MediaLimits limits_;
  VideoSampling sampling_;       // start()'s, to read the clip again (skip_to)
  std::unique_ptr<AVFormatContext, FormatCloser> fmt_;
  std::unique_ptr<AVCodecContext, CodecFreer> dec_;
  std::unique_ptr<SwsContext, SwsFreer> sws_;
  const AVCodec* codec_ = nullptr;  // the best stream's decoder (owned by FFmpeg)
  int stream_ = -1;
  int width_ = 0, height_ = 0;  // the stream's size: every frame's
  double time_base_ = 0, start_ = 0, duration_ = 0;
  double rate_ = 0;              // sample times per second of stream time
  std::vector<double> targets_;  // sample times, ascending
  size_t next_ = 0;              // first target no frame has been taken for
  int64_t served_ = 0;           // frames next() has returned
  bool eof_ = false;             // the demuxer is done and the decoder flushed
  std::unique_ptr<AVPacket, PacketFreer> pkt_;
  std::unique_ptr<AVFrame, FrameFreer> frame_;
  Image last_;                    // the last converted frame (serves later sample times)
  int64_t pending_ = 0;           // sample times last_ serves that next() has not returned yet:
                                  // a count, not copies (a high --fps repeats one frame many times)
  std::vector<uint8_t> scratch_;  // [out_h, stride] padded RGB24 rows for sws_scale
  size_t convert_from_ = 0;       // skip_to: frames serving only earlier sample times are not converted
  std::unique_ptr<AVFrame, FrameFreer> held_;  // skip_to: the last such frame, unconverted
  int64_t decoded_ = 0;           // frames the decoder returned
};

// One of kConcurrentProbes probes running at once (probe_video).
class ProbeSlot {
 public:
  static constexpr int kConcurrentProbes = 2;
  ProbeSlot() { slots().acquire(); }
  ~ProbeSlot() { slots().release(); }
  ProbeSlot(const ProbeSlot&) = delete;
  ProbeSlot& operator=(const ProbeSlot&) = delete;

 private:
  static std::counting_semaphore<kConcurrentProbes>& slots() {
    static std::counting_semaphore<kConcurrentProbes> s(kConcurrentProbes);
    return s;
  }
};

}  // namespace

struct VideoStream::Impl {
  Impl(const std::string& path, const MediaLimits& limits) : sampler(path, limits) {}
  FrameSampler sampler;
  MediaInfo info;
};

VideoStream::VideoStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VideoStream::~VideoStream() = default;

Result<std::unique_ptr<VideoStream>> VideoStream::open(const std::string& path, const VideoSampling& sampling,
                                                       const MediaLimits& limits) {
  auto impl = std::make_unique<Impl>(path, limits);
  VLKV_RETURN_IF_ERROR(impl->sampler.start(sampling));
  impl->info.width = impl->sampler.width();
  impl->info.height = impl->sampler.height();
  impl->info.n_frames = static_cast<int32_t>(impl->sampler.n_planned());
  impl->info.fps = impl->sampler.rate();
  impl->info.is_video = true;
  return std::unique_ptr<VideoStream>(new VideoStream(std::move(impl)));
}

const MediaInfo& VideoStream::info() const { return impl_->info; }
int64_t VideoStream::n_read() const { return impl_->sampler.n_served(); }
Result<Image> VideoStream::next() { return impl_->sampler.next(); }
Result<Image> VideoStream::skip_to(int64_t n, const std::function<bool(const Image&)>& accept) {
  return impl_->sampler.skip_to(n, accept);
}
int64_t VideoStream::n_decoded() const { return impl_->sampler.n_decoded(); }

Result<std::vector<Image>> load_video(const std::string& path, const VideoSampling& sampling,
                                      const MediaLimits& limits, double* frame_rate) {
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<VideoStream> stream, VideoStream::open(path, sampling, limits));
  std::vector<Image> frames;
  frames.reserve(static_cast<size_t>(stream->info().n_frames));
  for (int32_t i = 0; i < stream->info().n_frames; ++i) {
    VLKV_ASSIGN_OR_RETURN(Image f, stream->next());
    frames.push_back(std::move(f));
  }
  if (frame_rate) *frame_rate = stream->info().fps;
  return frames;
}

Result<MediaInfo> probe_video(const std::string& path, const VideoSampling& sampling, const MediaLimits& limits) {
  // A probe may open a decoder and decode a frame of up to the pixel limit: a few at a time,
  // so that many requests probing at once take a few probes' memory, not one each.
  ProbeSlot slot;
  FrameSampler sampler(path, limits);
  return sampler.probe(sampling);
}

}  // namespace vlkv
