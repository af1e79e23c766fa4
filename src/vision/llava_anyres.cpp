#include "vision/llava_anyres.h"

#include <algorithm>
#include <string>

#include "vision/vit_common_image.h"

namespace vlkv {
namespace {

constexpr const char* kPinpointsKey = "clip.vision.image_grid_pinpoints";
constexpr int64_t kMaxPinpointSide = 1 << 14;  // llama.cpp caps image_size at 8192; twice that is ample

}  // namespace

Result<std::vector<ImageSize>> read_image_grid_pinpoints(const GgufFile& g, int64_t tile) {
  std::vector<ImageSize> out;
  if (!g.find(kPinpointsKey)) return out;
  Result<std::vector<int64_t>> v = g.get_i64_array(kPinpointsKey);
  if (!v.is_ok()) return invalid_file(std::string("mmproj: '") + kPinpointsKey + "': " + v.status().message());
  if (v->empty() || v->size() % 2 != 0) {
    return invalid_file(std::string("mmproj: '") + kPinpointsKey + "' must hold (width, height) pairs, got " +
                        std::to_string(v->size()) + " values");
  }
  for (size_t i = 0; i < v->size(); i += 2) {
    const int64_t w = (*v)[i], h = (*v)[i + 1];
    if (w <= 0 || h <= 0 || w > kMaxPinpointSide || h > kMaxPinpointSide) {
      return invalid_file(std::string("mmproj: '") + kPinpointsKey + "' holds " + std::to_string(w) + "x" +
                          std::to_string(h));
    }
    if (w % tile != 0 || h % tile != 0) {
      return unsupported(std::string("mmproj: '") + kPinpointsKey + "' holds " + std::to_string(w) + "x" +
                         std::to_string(h) + ", not a multiple of the " + std::to_string(tile) +
                         "-pixel tile (clip.vision.image_size): partial tiles are not supported");
    }
    out.push_back({static_cast<int32_t>(w), static_cast<int32_t>(h)});
  }
  return out;
}

Result<LlavaAnyresTiles> llava_anyres_grid(ImageSize size, int32_t tile, const std::vector<ImageSize>& pinpoints) {
  if (size.width <= 0 || size.height <= 0) return invalid_argument("empty or inconsistent image");
  if (tile <= 0 || pinpoints.empty()) return invalid_argument("llava anyres: no tile size or pinpoints");
  LlavaAnyresTiles out;
  // Only an image larger than one tile is sliced (libmtmd's has_slices).
  if (size.width > tile || size.height > tile) {
    out.refined = select_best_resolution(size, pinpoints);
    if (out.refined.width <= 0) return invalid_argument("llava anyres: no pinpoint fits the image");
    out.grid_cols = out.refined.width / tile;
    out.grid_rows = out.refined.height / tile;
  }
  return out;
}

Result<LlavaAnyresTiles> llava_anyres_tiles(const Image& image, int32_t tile,
                                            const std::vector<ImageSize>& pinpoints) {
  if (!image.valid()) return invalid_argument("empty or inconsistent image");
  VLKV_ASSIGN_OR_RETURN(LlavaAnyresTiles out, llava_anyres_grid({image.width, image.height}, tile, pinpoints));
  if (out.grid_cols > 0) {
    const Image refined =
        resize_image_padded(image, out.refined.width, out.refined.height, ResizeAlgo::kBicubic, {0, 0, 0});
    for (int32_t y = 0; y < out.refined.height; y += tile) {
      for (int32_t x = 0; x < out.refined.width; x += tile) out.images.push_back(crop_image(refined, x, y, tile, tile));
    }
  }
  out.images.push_back(resize_image(image, tile, tile, ResizeAlgo::kBilinear));  // the overview, last
  return out;
}

}  // namespace vlkv
