#include "eval/vqa_items.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include <nlohmann/json.hpp>

namespace vlkv::cli {
namespace {

// Frames one item may list: far above any model's context, low enough that a hostile file
// cannot make the reader hold millions of paths.
constexpr size_t kMaxFramesPerItem = 1 << 16;

std::string beside(const std::string& dir, const std::string& p) {
  return !p.empty() && p[0] == '/' ? p : (dir.empty() ? p : dir + "/" + p);
}

Result<VqaItem> parse_item(const nlohmann::json& j, const std::string& dir, const std::string& where,
                           bool answer_required) {
  if (!j.is_object()) return invalid_argument(where + ": not a JSON object");
  auto string_field = [&](const char* key, bool required, std::string* out) -> Status {
    if (!j.contains(key)) return required ? invalid_argument(where + ": missing string field '" + key + "'") : Status::ok();
    if (!j[key].is_string()) return invalid_argument(where + ": field '" + std::string(key) + "' is not a string");
    *out = j[key].get<std::string>();
    return Status::ok();
  };
  VqaItem it;
  VLKV_RETURN_IF_ERROR(string_field("question", true, &it.question));
  VLKV_RETURN_IF_ERROR(string_field("answer", answer_required, &it.answer));
  VLKV_RETURN_IF_ERROR(string_field("type", false, &it.type));
  it.message = it.question;
  VLKV_RETURN_IF_ERROR(string_field("prompt", false, &it.message));
  if (j.contains("n_frames")) {
    if (!j["n_frames"].is_number_integer() || j["n_frames"].get<int64_t>() < 1 ||
        j["n_frames"].get<int64_t>() > static_cast<int64_t>(kMaxFramesPerItem))
      return invalid_argument(where + ": 'n_frames' must be an integer in [1, " + std::to_string(kMaxFramesPerItem) + "]");
    it.n_frames = j["n_frames"].get<int64_t>();
    it.n_frames_given = true;
  }
  if (j.contains("fps")) {
    if (!j["fps"].is_number() || !(j["fps"].get<double>() > 0) || j["fps"].get<double>() > 1000)
      return invalid_argument(where + ": 'fps' must be a number in (0, 1000]");
    it.fps = j["fps"].get<double>();
  }
  std::string image, video;
  VLKV_RETURN_IF_ERROR(string_field("image", false, &image));
  VLKV_RETURN_IF_ERROR(string_field("video", false, &video));
  if (j.contains("frames")) {
    const nlohmann::json& f = j["frames"];
    if (!f.is_array() || f.empty() || f.size() > kMaxFramesPerItem)
      return invalid_argument(where + ": 'frames' must be a non-empty array of at most " +
                              std::to_string(kMaxFramesPerItem) + " paths");
    for (const nlohmann::json& p : f) {
      if (!p.is_string()) return invalid_argument(where + ": 'frames' holds a non-string");
      it.paths.push_back(beside(dir, p.get<std::string>()));
    }
    it.media = VqaItem::Media::kFrames;
    if (it.n_frames_given && it.n_frames != static_cast<int64_t>(it.paths.size()))
      return invalid_argument(where + ": 'n_frames' " + std::to_string(it.n_frames) + " but " +
                              std::to_string(it.paths.size()) + " frames listed");
    it.n_frames = static_cast<int64_t>(it.paths.size());
  } else if (!video.empty()) {
    it.media = VqaItem::Media::kVideoFile;
    it.paths.push_back(beside(dir, video));
    if (!it.n_frames_given && it.fps <= 0)
      return invalid_argument(where + ": a 'video' file needs 'n_frames' or 'fps' (how to sample it)");
  } else if (!image.empty()) {
    it.paths.push_back(beside(dir, image));
  } else {
    return invalid_argument(where + ": needs 'image', 'frames' or 'video'");
  }
  return it;
}

}  // namespace

Result<std::vector<VqaItem>> read_vqa_items(const std::string& path, int64_t limit, bool answer_required) {
  std::ifstream f(path);
  if (!f) return not_found(path + ": cannot open VQA file");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::vector<VqaItem> items;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return invalid_argument(where + ": not JSON");
    VLKV_ASSIGN_OR_RETURN(VqaItem it, parse_item(j, dir, where, answer_required));
    it.line = line_no;
    items.push_back(std::move(it));
    if (limit > 0 && static_cast<int64_t>(items.size()) >= limit) break;
  }
  if (items.empty()) return invalid_argument(path + ": no VQA items");
  return items;
}

Result<Prompt> vqa_item_prompt(const Engine& e, VqaItem& it, const MediaLimits& limits) {
  std::vector<MediaItem> media;
  if (it.media == VqaItem::Media::kVideoFile) {
    VideoSampling sampling;
    if (it.n_frames_given) sampling.n_frames = static_cast<int32_t>(it.n_frames);
    else sampling.fps = it.fps;
    MediaItem m;
    m.is_video = true;
    VLKV_ASSIGN_OR_RETURN(m.frames, load_video(it.paths[0], sampling, limits, &m.fps));
    it.n_frames = static_cast<int64_t>(m.frames.size());  // what fps sampling gave
    media.push_back(std::move(m));
  } else {
    for (const std::string& p : it.paths) {
      VLKV_ASSIGN_OR_RETURN(Image img, load_image(p, limits));
      media.push_back(MediaItem{{std::move(img)}, false});
    }
  }
  return e.user_prompt(it.message, std::move(media), /*use_template=*/true);
}

bool vqa_items_vary_in_length(const std::vector<VqaItem>& items) {
  for (const VqaItem& it : items)
    if (it.n_frames != items.front().n_frames) return true;
  return false;
}

}  // namespace vlkv::cli
