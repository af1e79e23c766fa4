// LLaVA-NeXT "anyres" tiling as libmtmd's llava-uhd slicer does it for an mlp mmproj with
// clip.vision.image_grid_pinpoints: best pinpoint, bicubic fit on black, tiles row-major,
// then the overview. (llama.cpp neither unpads nor appends image_newline.)
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf_reader.h"
#include "vision/image.h"
#include "vision/select_best_resolution.h"
#include "vlkv/status.h"

namespace vlkv {

// clip.vision.image_grid_pinpoints as (width, height) pairs; empty when the key is absent.
// Refused (naming the key): an odd count, a value <= 0, or a side that is not a multiple of
// the tile (llama.cpp would feed the ViT a partial, non-square tile).
Result<std::vector<ImageSize>> read_image_grid_pinpoints(const GgufFile& gguf, int64_t tile);

// The images the ViT encodes for one picture, in prompt order. An image no larger than the
// tile on both sides is only the overview; otherwise the refined tiles row-major, then the
// overview. pinpoints must be non-empty and read_image_grid_pinpoints-valid.
struct LlavaAnyresTiles {
  ImageSize refined;      // {0, 0} when there are no tiles
  int32_t grid_cols = 0;
  int32_t grid_rows = 0;
  std::vector<Image> images; // grid_rows * grid_cols tiles, then the overview; each tile x tile
};
// The grid llava_anyres_tiles cuts for an image of `size`, without its pixels (images empty).
Result<LlavaAnyresTiles> llava_anyres_grid(ImageSize size, int32_t tile, const std::vector<ImageSize>& pinpoints);
Result<LlavaAnyresTiles> llava_anyres_tiles(const Image& image, int32_t tile, const std::vector<ImageSize>& pinpoints);

}  // namespace vlkv
