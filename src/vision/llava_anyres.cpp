#include "vision/llava_anyres.h"

#include <algorithm>
#include <limits>
#include <string>

#include "vision/vit_common_image.h"

namespace vlkv {
namespace {

constexpr const char* kPinpointsKey = "clip.vision.image_grid_pinpoints";
constexpr int64_t kMaxPinpointSide = 1 << 14;  // llama.cpp caps image_size at 8192; twice that is ample

// libmtmd's resize_maintain_aspect_ratio: float scale, sides truncated.
PinpointSize fit_keeping_aspect(PinpointSize orig, PinpointSize target) {
  const float scale_w = static_cast<float>(target.width) / static_cast<float>(orig.width);
  const float scale_h = static_cast<float>(target.height) / static_cast<float>(orig.height);
  const float scale = std::min(scale_w, scale_h);
  return {static_cast<int32_t>(static_cast<float>(orig.width) * scale),
          static_cast<int32_t>(static_cast<float>(orig.height) * scale)};
}

}  // namespace

Result<std::vector<PinpointSize>> read_image_grid_pinpoints(const GgufFile& g, int64_t tile) {
  std::vector<PinpointSize> out;
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

PinpointSize llava_select_best_resolution(PinpointSize original, const std::vector<PinpointSize>& candidates) {
  PinpointSize best;
  int64_t min_wasted = std::numeric_limits<int64_t>::max();
  int64_t max_effective = 0;
  const int64_t original_area = static_cast<int64_t>(original.width) * original.height;
  for (const PinpointSize& c : candidates) {
    const PinpointSize fitted = fit_keeping_aspect(original, c);
    const int64_t effective = std::min(static_cast<int64_t>(fitted.width) * fitted.height, original_area);
    const int64_t wasted = static_cast<int64_t>(c.width) * c.height - effective;
    if (effective > max_effective || (effective == max_effective && wasted < min_wasted)) {
      max_effective = effective;
      min_wasted = wasted;
      best = c;
    }
  }
  return best;
}

Result<LlavaAnyresTiles> llava_anyres_grid(PinpointSize size, int32_t tile, const std::vector<PinpointSize>& pinpoints) {
  if (size.width <= 0 || size.height <= 0) return invalid_argument("empty or inconsistent image");
  if (tile <= 0 || pinpoints.empty()) return invalid_argument("llava anyres: no tile size or pinpoints");
  LlavaAnyresTiles out;
  // Only an image larger than one tile is sliced (libmtmd's has_slices).
  if (size.width > tile || size.height > tile) {
    out.refined = llava_select_best_resolution(size, pinpoints);
    if (out.refined.width <= 0) return invalid_argument("llava anyres: no pinpoint fits the image");
    out.grid_cols = out.refined.width / tile;
    out.grid_rows = out.refined.height / tile;
  }
  return out;
}

Result<LlavaAnyresTiles> llava_anyres_tiles(const Image& image, int32_t tile,
                                            const std::vector<PinpointSize>& pinpoints) {
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
