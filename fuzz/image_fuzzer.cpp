// libFuzzer target: decode_image (stb_image behind MediaLimits) and probe_image_data (its
// header read, which must agree with it) on arbitrary bytes.
// Limits tighter than the defaults keep each run small and put the limit checks
// themselves under test: a decoded image beyond them, or one whose pixel buffer does
// not match its size, aborts. Every pixel row's first and last byte is read, so a
// short buffer shows up as an ASan report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "vlkv/media.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads from being optimized away

vlkv::MediaLimits fuzz_limits() {
  vlkv::MediaLimits limits;
  limits.max_file_bytes = 1 << 20;
  limits.max_side = 1024;
  limits.max_pixels = 256 * 256;
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const vlkv::MediaLimits limits = fuzz_limits();
  // The header probe the servers count tokens with: never more permissive than decoding, and
  // the size it reads is the decoded size (the token count is made from it).
  auto info = vlkv::probe_image_data(data, size, limits);
  auto img = vlkv::decode_image(data, size, limits);
  if (!info.is_ok() && img.is_ok()) std::abort();
  if (!img.is_ok()) return 0;
  const vlkv::Image& im = *img;
  if (info->width != im.width || info->height != im.height) std::abort();
  if (!im.valid()) std::abort();
  if (im.width > limits.max_side || im.height > limits.max_side ||
      static_cast<int64_t>(im.width) * im.height > limits.max_pixels)
    std::abort();  // the limits must hold for every format stb_image reads
  uint64_t h = 0;
  const size_t row = static_cast<size_t>(im.width) * 3;
  for (int32_t y = 0; y < im.height; ++y) h += im.pixels[y * row] + im.pixels[y * row + row - 1];
  g_sink = h;
  return 0;
}
