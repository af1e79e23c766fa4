#include "vision/stb_image_guards.h"

#include <cstring>

#include <climits>

namespace vlkv {
namespace {

constexpr int kNoMarker = 0xff;  // stb_image's STBI__MARKER_none
constexpr int kSoi = 0xd8, kEoi = 0xd9, kSos = 0xda, kDnl = 0xdc, kDri = 0xdd, kDqt = 0xdb, kDht = 0xc4;

bool is_sof(int m) { return m == 0xc0 || m == 0xc1 || m == 0xc2; }  // the frames stb_image decodes
bool is_restart(int m) { return m >= 0xd0 && m <= 0xd7; }

// The outcome of reading one marker segment, as stb_image would.
enum class Step { kNext, kStop, kUnsafe };  // go on / stb_image fails here / table overflow

// A cursor over the data with stb_image's reading rules: past the end, reads give 0.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool at_end() const { return pos_ >= size_; }
  int get8() { return pos_ < size_ ? data_[pos_++] : 0; }
  int get16() {
    const int hi = get8();
    return (hi << 8) | get8();
  }
  // stbi__skip: a negative count skips to the end.
  void skip(int64_t n) {
    if (n < 0 || static_cast<uint64_t>(n) > size_ - pos_) n = static_cast<int64_t>(size_ - pos_);
    pos_ += static_cast<size_t>(n);
  }

  // stbi__get_marker: 0xff, any 0xff fill bytes, then the marker; kNoMarker when the
  // next byte is not 0xff (one byte consumed).
  int marker() {
    int x = get8();
    if (x != 0xff) return kNoMarker;
    while (x == 0xff) x = get8();
    return x;
  }

  // Skips entropy-coded data to the next marker that is not a restart (RSTn) marker,
  // as stb_image's bit reader finds it: 0xff 0x00 is a data byte, 0xff fill bytes
  // are skipped. kNoMarker at the end of the data.
  int marker_after_scan() {
    while (!at_end()) {
      if (get8() != 0xff) continue;
      int c = get8();
      while (c == 0xff) c = get8();
      if (c != 0 && !is_restart(c)) return c;
    }
    return kNoMarker;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// stbi__process_marker's DHT case: tables of (class/id, 16 counts, codes) while the
// segment length lasts. The counts' sum must not pass 256.
Step read_dht(Reader& r) {
  int64_t left = r.get16() - 2;
  while (left > 0) {
    const int q = r.get8();
    if ((q >> 4) > 1 || (q & 15) > 3) return Step::kStop;  // "bad DHT header"
    int n = 0;
    for (int i = 0; i < 16; ++i) n += r.get8();
    if (n > 256) return Step::kUnsafe;
    r.skip(n);
    left -= 17 + n;
  }
  return left == 0 ? Step::kNext : Step::kStop;
}

// stbi__process_marker: the segments that may come before a frame or between scans.
Step read_segment(Reader& r, int m) {
  if (m == kDht) return read_dht(r);
  if (m == kDri) {
    if (r.get16() != 4) return Step::kStop;
    r.get16();
    return Step::kNext;
  }
  if (m == kDqt) {
    int64_t left = r.get16() - 2;
    while (left > 0) {
      const int q = r.get8();
      if ((q >> 4) > 1 || (q & 15) > 3) return Step::kStop;
      const int bytes = (q >> 4) ? 128 : 64;
      r.skip(bytes);
      left -= bytes + 1;
    }
    return left == 0 ? Step::kNext : Step::kStop;
  }
  if ((m >= 0xe0 && m <= 0xef) || m == 0xfe) {  // APPn, COM: skipped by their length
    const int len = r.get16();
    if (len < 2) return Step::kStop;
    r.skip(len - 2);
    return Step::kNext;
  }
  return Step::kStop;  // "expected marker" / "unknown marker"
}

// Frame, scan and DNL headers are skipped by their length: stb_image checks them and
// may stop there, and going on past its stop only checks more than it reads.
void skip_by_length(Reader& r) { r.skip(r.get16() - 2); }

// stbi__pnm_isspace
bool pnm_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

bool jpeg_huffman_tables_fit(const uint8_t* data, size_t size) {
  Reader r(data, size);
  if (r.marker() != kSoi) return true;
  // stbi__decode_jpeg_header: segments up to the frame header; bytes between
  // segments that do not start a marker are skipped.
  int m = r.marker();
  while (!is_sof(m)) {
    const Step s = read_segment(r, m);
    if (s != Step::kNext) return s != Step::kUnsafe;
    m = r.marker();
    while (m == kNoMarker) {
      if (r.at_end()) return true;
      m = r.marker();
    }
  }
  skip_by_length(r);
  // stbi__decode_jpeg_image: scans and the segments between them, up to EOI.
  m = r.marker();
  while (m != kEoi) {
    if (m == kSos) {
      skip_by_length(r);
      m = r.marker_after_scan();
      if (m == kNoMarker) return true;
      continue;
    }
    if (m == kDnl) {
      skip_by_length(r);
    } else {
      const Step s = read_segment(r, m);
      if (s != Step::kNext) return s != Step::kUnsafe;
    }
    m = r.marker();
  }
  return true;
}

bool pnm_header_numbers_fit(const uint8_t* data, size_t size) {
  if (size < 2 || data[0] != 'P' || (data[1] != '5' && data[1] != '6')) return true;
  // stb_image keeps the last byte read in `c`; "at the end" means no byte is left after it.
  size_t pos = 2;
  auto at_end = [&] { return pos >= size; };
  auto get8 = [&] { return pos < size ? static_cast<int>(data[pos++]) : 0; };
  int c = get8();
  for (int number = 0; number < 3; ++number) {  // width, height, maximum value
    for (;;) {  // stbi__pnm_skip_whitespace
      while (!at_end() && pnm_space(c)) c = get8();
      if (at_end() || c != '#') break;
      while (!at_end() && c != '\n' && c != '\r') c = get8();
    }
    int value = 0;  // stbi__pnm_getinteger
    while (!at_end() && c >= '0' && c <= '9') {
      if (value > (INT_MAX - (c - '0')) / 10) return false;
      value = value * 10 + (c - '0');
      c = get8();
    }
  }
  return true;
}

bool png_chunks_fit(const uint8_t* data, size_t size) {
  static constexpr uint8_t kSignature[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
  if (size < 8 || std::memcmp(data, kSignature, 8) != 0) return true;
  size_t pos = 8;
  while (size - pos >= 8) {  // length + type; a shorter tail is stb_image's "outofdata"
    const uint64_t length = (uint64_t{data[pos]} << 24) | (uint64_t{data[pos + 1]} << 16) |
                            (uint64_t{data[pos + 2]} << 8) | data[pos + 3];
    if (std::memcmp(data + pos + 4, "IEND", 4) == 0) break;  // stb_image stops here, CRC unread
    if (length + 4 > size - pos - 8) return false;  // data + CRC past the end of the file
    pos += 8 + static_cast<size_t>(length) + 4;
  }
  return true;
}

}  // namespace vlkv
