// The checks every media file passes before it is read (image_loader.cpp, video_loader.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "vlkv/media.h"
#include "vlkv/status.h"

namespace vlkv {

// The size of the regular file at path, or why a media file of this `kind` ("image",
// "video") is refused before reading it: missing, not a regular file, over max_file_bytes.
Result<uint64_t> media_file_size(const std::string& path, const char* kind, const MediaLimits& limits);

}  // namespace vlkv
