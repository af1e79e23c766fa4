// llava's select_best_resolution, as libmtmd's llava-uhd slicer uses it (LLaVA-NeXT
// pinpoints, InternVL's tile grids): the candidate canvas that keeps the most of the
// image's pixels after an aspect-preserving fit, ties broken by the least padding.
#pragma once

#include <cstdint>
#include <vector>

namespace vlkv {

struct ImageSize {
  int32_t width = 0;
  int32_t height = 0;
  bool operator==(const ImageSize&) const = default;
};

// effective = min(fit.w * fit.h, original area), fit = original scaled by
// min(cand.w / w, cand.h / h) in f32 and truncated; wasted = cand area - effective.
// The first candidate with the largest effective area (then the smallest waste) wins,
// so the candidates' order matters. candidates must not be empty.
ImageSize select_best_resolution(ImageSize original, const std::vector<ImageSize>& candidates);

}  // namespace vlkv
