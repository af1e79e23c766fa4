// Still images through stb_image (libstb-dev): PNG, JPEG, BMP, GIF (first frame),
// TGA, PSD, PNM, HDR. The header's dimensions are checked against MediaLimits
// before any pixel is decoded, so a small file declaring a huge image (a
// decompression bomb) costs nothing.
#include <cstdio>
#include <cstring>
#include <memory>
#include <sys/stat.h>

#include "vision/image.h"
#include "vision/media_file.h"
#include "vision/stb_image_guards.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_STDIO                     // we read files ourselves, under a size limit
#define STBI_MAX_DIMENSIONS (1 << 16)     // stb's own guard; ours (MediaLimits) is tighter
#include "stb_image.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace vlkv {
namespace {

Status check_dims(int64_t w, int64_t h, const MediaLimits& limits, const std::string& what) {
  if (w <= 0 || h <= 0) return invalid_file(what + ": the image has no pixels (" + std::to_string(w) + "x" +
                                            std::to_string(h) + ")");
  if (w > limits.max_side || h > limits.max_side || w * h > limits.max_pixels) {
    return invalid_file(what + ": image of " + std::to_string(w) + "x" + std::to_string(h) +
                        " pixels exceeds the limit (" + std::to_string(limits.max_side) + " per side, " +
                        std::to_string(limits.max_pixels) + " in all)");
  }
  return Status::ok();
}

// The header's dimensions, checked: everything decode does before it decodes a pixel.
Result<MediaInfo> read_header(const uint8_t* data, size_t size, const MediaLimits& limits, const std::string& what) {
  if (size == 0) return invalid_file(what + ": empty image data");
  if (size > limits.max_file_bytes) return invalid_file(what + ": image data larger than the limit");
  if (size > static_cast<size_t>(INT32_MAX)) return invalid_file(what + ": image data too large");
  const int len = static_cast<int>(size);
  if (!jpeg_huffman_tables_fit(data, size)) {  // before stb_image reads any table (stbi_info does)
    return invalid_file(what + ": corrupt JPEG (a Huffman table of more than 256 codes)");
  }
  if (!jpeg_scan_tables_defined(data, size)) return invalid_file(what + ": corrupt JPEG (a scan uses an undefined Huffman table)");
  if (!pnm_header_numbers_fit(data, size)) return invalid_file(what + ": corrupt PNM header (a number too large)");
  if (!png_chunks_fit(data, size)) return invalid_file(what + ": corrupt or truncated PNG image (a chunk longer than the file)");
  // stb_image calls a PNG over 2^30 bytes of pixels "unknown image type": the size its
  // IHDR claims (bytes 16-23, after the signature and the chunk's length and type) says why.
  static constexpr uint8_t kPngIhdr[16] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  if (size >= 24 && std::memcmp(data, kPngIhdr, sizeof kPngIhdr) == 0) {
    auto be32 = [&](size_t at) {
      return (int64_t{data[at]} << 24) | (int64_t{data[at + 1]} << 16) | (int64_t{data[at + 2]} << 8) | data[at + 3];
    };
    VLKV_RETURN_IF_ERROR(check_dims(be32(16), be32(20), limits, what));
  }
  int w = 0, h = 0, channels = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &channels)) {
    return invalid_file(what + ": not a readable image (" + stbi_failure_reason() + ")");
  }
  VLKV_RETURN_IF_ERROR(check_dims(w, h, limits, what));
  MediaInfo info;
  info.width = w;
  info.height = h;
  return info;
}

Result<Image> decode(const uint8_t* data, size_t size, const MediaLimits& limits, const std::string& what) {
  VLKV_ASSIGN_OR_RETURN(MediaInfo info, read_header(data, size, limits, what));
  const int len = static_cast<int>(size);
  const int w = info.width, h = info.height;
  // In the file's own channels: stb_image 2.27 converts a 16-bit greyscale PGM to RGB as if
  // it were 8-bit and then reads twice the buffer it made (a heap overflow, found by
  // fuzz/image_fuzzer), so the conversion to RGB is ours.
  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(stbi_load_from_memory(data, len, &dw, &dh, &dc, 0),
                                                   stbi_image_free);
  if (!pixels) return invalid_file(what + ": cannot decode the image (" + stbi_failure_reason() + ")");
  if (dw != w || dh != h) return invalid_file(what + ": image dimensions changed while decoding");
  if (dc < 1 || dc > 4) return invalid_file(what + ": unexpected channel count " + std::to_string(dc));
  Image img;
  img.width = w;
  img.height = h;
  const size_t n = static_cast<size_t>(w) * h;
  img.pixels.resize(n * 3);
  const stbi_uc* src = pixels.get();  // [h, w, dc]: grey, grey+alpha, RGB or RGBA
  for (size_t i = 0; i < n; ++i, src += dc) {
    uint8_t* dst = &img.pixels[i * 3];
    if (dc >= 3) {
      dst[0] = src[0], dst[1] = src[1], dst[2] = src[2];  // alpha dropped, as stb_image does
    } else {
      dst[0] = dst[1] = dst[2] = src[0];
    }
  }
  return img;
}

// The file's bytes, under limits.max_file_bytes.
Result<std::vector<uint8_t>> read_file(const std::string& path, const MediaLimits& limits) {
  VLKV_ASSIGN_OR_RETURN(const uint64_t size, media_file_size(path, "image", limits));
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) return not_found(path + ": cannot open image file");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (!bytes.empty() && std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    return io_error(path + ": cannot read image file");
  }
  return bytes;
}

}  // namespace

Result<uint64_t> media_file_size(const std::string& path, const char* kind, const MediaLimits& limits) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found(path + ": cannot open " + kind + " file");
  if (!S_ISREG(st.st_mode)) return invalid_argument(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.max_file_bytes) {
    return invalid_file(path + ": " + kind + " file of " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                        std::to_string(limits.max_file_bytes));
  }
  return static_cast<uint64_t>(st.st_size);
}

Result<Image> decode_image(const uint8_t* data, size_t size, const MediaLimits& limits) {
  return decode(data, size, limits, "image");
}

Result<MediaInfo> probe_image_data(const uint8_t* data, size_t size, const MediaLimits& limits) {
  return read_header(data, size, limits, "image");
}

Result<Image> load_image(const std::string& path, const MediaLimits& limits) {
  VLKV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_file(path, limits));
  return decode(bytes.data(), bytes.size(), limits, path);
}

Result<MediaInfo> probe_image(const std::string& path, const MediaLimits& limits) {
  VLKV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_file(path, limits));
  return read_header(bytes.data(), bytes.size(), limits, path);
}

}  // namespace vlkv
