// Text a model reads around each frame of a video: a label before the frame (its time) and a
// separator after it, declared by the mmproj (keys vlkv.video.frame_label and
// vlkv.video.frame_separator; docs/cli.md, "Time labels between frames"). tinyvideo was trained
// on frames laid out as "0.0 s: <frame>\n0.5 s: <frame>\n...": without the labels a `--video`
// prompt would not be the one it learned to read. The layout equals a prompt that spells the
// labels out around one image per frame, tokens included: the first label joins the text before
// the video, the last separator the text after it (prompt.cpp's assemble), as in such a prompt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gguf/gguf_reader.h"
#include "vision/vision_model.h"
#include "vlkv/status.h"

namespace vlkv {

inline constexpr const char* kFrameLabelKey = "vlkv.video.frame_label";
inline constexpr const char* kFrameSeparatorKey = "vlkv.video.frame_separator";

struct VideoFrameLabels {
  // Before each frame: "{t}" becomes the frame's time in seconds with one decimal (frame / fps;
  // the index itself where the rate is unknown), "{i}" its 0-based index.
  std::string label;
  std::string separator;  // after each frame

  std::string label_of(int64_t frame, double fps) const;
};

// Checks a label and separator as a hostile file may give them: bounded, no media marker, no
// NUL, no "{" but in "{t}" / "{i}".
Result<VideoFrameLabels> parse_video_frame_labels(std::string label, std::string separator);

// The mmproj's labels, or none when it declares neither key. Refused where the projector
// encodes frames together (its video pieces are not one frame's pieces after another).
Result<std::optional<VideoFrameLabels>> read_video_frame_labels(const GgufFile& mmproj, const VisionModel& vision);

}  // namespace vlkv
