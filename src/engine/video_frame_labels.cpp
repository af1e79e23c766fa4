#include "engine/video_frame_labels.h"

#include <cstdio>

#include "vlkv/engine.h"

namespace vlkv {

namespace {

constexpr size_t kMaxLabelBytes = 256;

Status check_text(const std::string& what, const std::string& text) {
  if (text.size() > kMaxLabelBytes)
    return invalid_file(what + " is " + std::to_string(text.size()) + " bytes (at most " + std::to_string(kMaxLabelBytes) + ")");
  if (text.find('\0') != std::string::npos) return invalid_file(what + " holds a NUL byte");
  if (text.find(kMediaMarker) != std::string::npos) return invalid_file(what + " holds the media marker " + kMediaMarker);
  for (size_t at = text.find('{'); at != std::string::npos; at = text.find('{', at + 1)) {
    if (text.compare(at, 3, "{t}") != 0 && text.compare(at, 3, "{i}") != 0)
      return invalid_file(what + " has a '{' that is not {t} or {i}: \"" + text + "\"");
  }
  return Status::ok();
}

}  // namespace

std::string VideoFrameLabels::label_of(int64_t frame, double fps) const {
  char time[32];
  std::snprintf(time, sizeof time, "%.1f", fps > 0 ? static_cast<double>(frame) / fps : static_cast<double>(frame));
  std::string out;
  for (size_t at = 0; at < label.size(); ++at) {
    if (label.compare(at, 3, "{t}") == 0) {
      out += time;
      at += 2;
    } else if (label.compare(at, 3, "{i}") == 0) {
      out += std::to_string(frame);
      at += 2;
    } else {
      out += label[at];
    }
  }
  return out;
}

Result<VideoFrameLabels> parse_video_frame_labels(std::string label, std::string separator) {
  if (Status st = check_text(std::string(kFrameLabelKey), label); !st.is_ok()) return st;
  if (Status st = check_text(std::string(kFrameSeparatorKey), separator); !st.is_ok()) return st;
  return VideoFrameLabels{std::move(label), std::move(separator)};
}

Result<std::optional<VideoFrameLabels>> read_video_frame_labels(const GgufFile& mmproj, const VisionModel& vision) {
  if (!mmproj.find(kFrameLabelKey) && !mmproj.find(kFrameSeparatorKey)) return std::optional<VideoFrameLabels>();
  std::string label, separator;
  if (mmproj.find(kFrameLabelKey)) {
    VLKV_ASSIGN_OR_RETURN(label, mmproj.get_string(kFrameLabelKey));
  }
  if (mmproj.find(kFrameSeparatorKey)) {
    VLKV_ASSIGN_OR_RETURN(separator, mmproj.get_string(kFrameSeparatorKey));
  }
  if (!vision.video_frames_independent()) {
    return unsupported(std::string("the mmproj declares video frame labels (") + kFrameLabelKey + "), but the " +
                       std::string(vision.projector_type()) +
                       " projector encodes a video's frames together: there is no place between frames for them");
  }
  VLKV_ASSIGN_OR_RETURN(VideoFrameLabels parsed, parse_video_frame_labels(std::move(label), std::move(separator)));
  return std::optional<VideoFrameLabels>(std::move(parsed));
}

}  // namespace vlkv
