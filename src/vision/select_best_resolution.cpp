#include "vision/select_best_resolution.h"

#include <algorithm>
#include <limits>

#include "base/check.h"

namespace vlkv {

ImageSize select_best_resolution(ImageSize original, const std::vector<ImageSize>& candidates) {
  VLKV_CHECK(!candidates.empty() && original.width > 0 && original.height > 0);
  ImageSize best;
  int64_t max_effective = 0;
  int64_t min_wasted = std::numeric_limits<int64_t>::max();
  const int64_t original_area = static_cast<int64_t>(original.width) * original.height;
  for (const ImageSize& c : candidates) {
    // libmtmd's resize_maintain_aspect_ratio: f32 scale, sides truncated.
    const float scale = std::min(static_cast<float>(c.width) / static_cast<float>(original.width),
                                 static_cast<float>(c.height) / static_cast<float>(original.height));
    const int64_t fit_w = static_cast<int32_t>(static_cast<float>(original.width) * scale);
    const int64_t fit_h = static_cast<int32_t>(static_cast<float>(original.height) * scale);
    const int64_t effective = std::min(fit_w * fit_h, original_area);
    const int64_t wasted = static_cast<int64_t>(c.width) * c.height - effective;
    if (effective > max_effective || (effective == max_effective && wasted < min_wasted)) {
      max_effective = effective;
      min_wasted = wasted;
      best = c;
    }
  }
  return best;
}

}  // namespace vlkv
