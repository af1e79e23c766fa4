// video_url parts of chat requests: a video arrives as a data: URI (or file:// under
// --media-path); FFmpeg reads files, so a data: URI's bytes go to a private temp file that
// lives as long as the request holds it. Its container is probed while the request is
// parsed (frames, sizes: the prompt's token count before any frame is decoded).
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "server/data_uri.h"
#include "server/openai_request.h"

namespace vlkv::server {
namespace {

// A file in $TMPDIR (or /tmp) readable only by this process's user, removed on destruction.
class TempFile {
 public:
  static Result<std::shared_ptr<const TempFile>> write(const std::vector<uint8_t>& bytes) {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/vlkv_video_XXXXXX";
    const int fd = mkstemp(pattern.data());
    if (fd < 0) return io_error("cannot create a temporary file for the video");
    auto file = std::shared_ptr<const TempFile>(new TempFile(pattern));
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
      if (n <= 0) {
        ::close(fd);
        return io_error("cannot write the video to a temporary file");
      }
      off += static_cast<size_t>(n);
    }
    ::close(fd);
    return file;
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// An uploaded video's errors name it as the client knows it, never by the server's temp path.
Status without_temp_path(const Status& st, const std::string& temp_path) {
  if (st.is_ok() || temp_path.empty()) return st;
  std::string m = st.message();
  for (size_t at = m.find(temp_path); at != std::string::npos; at = m.find(temp_path, at))
    m.replace(at, temp_path.size(), "the video_url data");
  return Status(st.code(), std::move(m), st.kind());
}

VideoSampling sampling(const RequestLimits& limits) {
  VideoSampling s;
  if (limits.video_fps > 0) s.fps = limits.video_fps;
  else s.n_frames = limits.video_frames;
  return s;
}

}  // namespace

Result<RequestImage> read_video_url(const std::string& url, const RequestLimits& limits) {
  RequestImage video;
  video.is_video = true;
  if (url.rfind("data:", 0) == 0) {
    Result<DataUri> uri = parse_data_uri(url, limits.media.max_file_bytes);
    if (!uri.is_ok()) return uri.status();
    if (!uri->media_type.empty() && uri->media_type.rfind("video/", 0) != 0)
      return invalid_argument("data: URI of type '" + uri->media_type + "' is not a video");
    VLKV_ASSIGN_OR_RETURN(std::shared_ptr<const TempFile> file, TempFile::write(uri->data));
    video.path = file->path();
    video.owned_file = file;
  } else if (url.rfind("file://", 0) == 0) {
    if (limits.media_path.empty()) return invalid_argument("file:// URLs are refused (start the server with --media-path DIR)");
    VLKV_ASSIGN_OR_RETURN(video.path, resolve_under(url.substr(7), limits.media_path));
  } else {
    return invalid_argument("only data: URIs (and file:// under --media-path) are accepted; remote URLs are not fetched");
  }
  Result<MediaInfo> info = probe_video(video.path, sampling(limits), limits.media);
  if (!info.is_ok()) return without_temp_path(info.status(), video.owned_file ? video.path : std::string());
  video.info = *info;
  return video;
}

Result<MediaItem> decode_request_media(const RequestImage& media, const RequestLimits& limits) {
  if (!media.is_video) {
    VLKV_ASSIGN_OR_RETURN(Image img, decode_request_image(media, limits));
    return MediaItem{{std::move(img)}, false};
  }
  double rate = 0;
  Result<std::vector<Image>> frames = load_video(media.path, sampling(limits), limits.media, &rate);
  if (!frames.is_ok()) return without_temp_path(frames.status(), media.owned_file ? media.path : std::string());
  return MediaItem{std::move(frames).value(), true, rate};
}

}  // namespace vlkv::server
