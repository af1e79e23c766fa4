// The VQA items `vlkv eval --vqa` reads (JSON lines) and the prompts it builds from them:
// one image, a list of frames given as images (a video the way a user feeds it with one
// --image per frame and a time marker before each), or a video file sampled by frames or fps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/media.h"
#include "vlkv/status.h"

namespace vlkv::cli {

struct VqaItem {
  enum class Media { kImage, kFrames, kVideoFile };
  Media media = Media::kImage;
  std::vector<std::string> paths;  // kImage: one; kFrames: one per frame; kVideoFile: one
  std::string message;             // `prompt` (media markers inline) or else `question`
  std::string question, answer, type;
  int64_t n_frames = 1;            // frames the item shows (the length the breakdown groups by)
  bool n_frames_given = false;
  double fps = 0;                  // kVideoFile sampled by fps when n_frames is not given
  int64_t line = 0;                // line in the file, for errors
};

// One JSON object per line: `question` and `answer` (strings) and one of `image` (a path),
// `frames` (an array of paths) or `video` naming a file (then `n_frames` or `fps` samples it;
// a `video` that names no file beside `frames` is only the video's id). Optional: `prompt`
// (the user message, one <__media__> per image or frame; default `question`), `type`
// (a question type the breakdown groups by), `n_frames`. Paths are relative to the file.
// At most `limit` items (0: all). `answer` may be left out where !answer_required (calibration
// prompts ask without scoring).
Result<std::vector<VqaItem>> read_vqa_items(const std::string& path, int64_t limit, bool answer_required = true);

// The item's user prompt, media loaded under `limits`, wrapped in the model's chat template.
// A video file sampled by fps sets it.n_frames to the frames it gave.
Result<Prompt> vqa_item_prompt(const Engine& e, VqaItem& it, const MediaLimits& limits);

// Whether the items show different lengths (then a per-length breakdown is worth printing).
bool vqa_items_vary_in_length(const std::vector<VqaItem>& items);

}  // namespace vlkv::cli
