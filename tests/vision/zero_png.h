// A PNG of given size whose pixels are all 0, made without zlib: the IDAT holds one
// fixed-Huffman deflate block (a literal 0, then matches of 258 bytes at distance 1), so
// an 8192 x 8192 greyscale image is ~400 KB that stb_image decodes to 64 Mi pixels — issue
// 24's "small PNG that decodes to 8192 x 8192" probe. Also any header size (a hostile
// 60000 x 60000) with a valid deflate stream behind it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vlkv::test_png {

class BitWriter {
 public:
  // Huffman codes go most significant bit first; other fields least significant first.
  void code(uint32_t bits, int n) {
    for (int i = n - 1; i >= 0; --i) bit((bits >> i) & 1);
  }
  void value(uint32_t v, int n) {
    for (int i = 0; i < n; ++i) bit((v >> i) & 1);
  }
  std::vector<uint8_t> finish() { return std::move(out_); }

 private:
  void bit(uint32_t b) {
    if (n_ == 0) out_.push_back(0);
    out_.back() |= static_cast<uint8_t>(b << n_);
    n_ = (n_ + 1) & 7;
  }
  std::vector<uint8_t> out_;
  int n_ = 0;
};

inline uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return c ^ 0xffffffffu;
}

// A zlib stream of n zero bytes.
inline std::vector<uint8_t> zlib_zeros(uint64_t n) {
  BitWriter w;
  w.value(1, 1);  // BFINAL
  w.value(1, 2);  // BTYPE 01: fixed Huffman
  uint64_t left = n;
  if (left > 0) {
    w.code(0x30, 8);  // literal 0
    --left;
  }
  for (; left >= 258; left -= 258) {
    w.code(0xc5, 8);  // length symbol 285 (258 bytes, no extra bits)
    w.code(0, 5);     // distance symbol 0 (1 byte back)
  }
  for (; left > 0; --left) w.code(0x30, 8);
  w.code(0, 7);  // end of block (256)
  std::vector<uint8_t> z = w.finish();
  z.insert(z.begin(), 2, 0);
  z[0] = 0x78;  // zlib header: deflate, 32 KiB window, no dictionary
  z[1] = 0x01;
  const uint32_t a = 1, b = static_cast<uint32_t>(n % 65521);  // Adler-32 of n zeros
  const uint32_t adler = (b << 16) | a;
  for (int s = 24; s >= 0; s -= 8) z.push_back(static_cast<uint8_t>(adler >> s));
  return z;
}

inline void put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

inline void chunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& data) {
  put32(png, static_cast<uint32_t>(data.size()));
  std::vector<uint8_t> td(type, type + 4);
  td.insert(td.end(), data.begin(), data.end());
  png.insert(png.end(), td.begin(), td.end());
  put32(png, crc32(td.data(), td.size()));
}

// An 8-bit greyscale PNG of width x height zeros. The IDAT is made for rows of
// `data_rows` (default: height), so a hostile header can claim more than its data holds.
inline std::vector<uint8_t> zero_png(uint32_t width, uint32_t height, int64_t data_rows = -1) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put32(ihdr, width);
  put32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});  // depth 8, greyscale, deflate, filter 0, no interlace
  chunk(png, "IHDR", ihdr);
  const uint64_t rows = data_rows < 0 ? height : static_cast<uint64_t>(data_rows);
  chunk(png, "IDAT", zlib_zeros(rows * (uint64_t{width} + 1)));
  chunk(png, "IEND", {});
  return png;
}

}  // namespace vlkv::test_png
