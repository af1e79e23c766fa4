#include "vision/stb_image_guards.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>

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

// The Huffman tables stb_image has built so far: [class: 0 DC, 1 AC][id]. Its decoder
// state is not zeroed, so a scan that decodes with a table no DHT built reads garbage
// code limits and indexes past them.
using DefinedTables = std::array<std::array<bool, 4>, 2>;

// stbi__process_marker's DHT case: tables of (class/id, 16 counts, codes) while the
// segment length lasts. The counts' sum must not pass 256.
Step read_dht(Reader& r, DefinedTables& defined) {
  int64_t left = r.get16() - 2;
  while (left > 0) {
    const int q = r.get8();
    if ((q >> 4) > 1 || (q & 15) > 3) return Step::kStop;  // "bad DHT header"
    int n = 0;
    for (int i = 0; i < 16; ++i) n += r.get8();
    if (n > 256) return Step::kUnsafe;
    defined[q >> 4][q & 15] = true;
    r.skip(n);
    left -= 17 + n;
  }
  return left == 0 ? Step::kNext : Step::kStop;
}

// stbi__process_marker: the segments that may come before a frame or between scans.
Step read_segment(Reader& r, int m, DefinedTables& defined) {
  if (m == kDht) return read_dht(r, defined);
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

// A scan header (stbi__process_scan_header), skipped by its length as skip_by_length; true
// when stb_image would accept it and then decode with a table no DHT has built: sequential
// scans use each component's DC and AC tables, progressive DC-first scans (Ss = 0, Ah = 0)
// the DC table, refinement DC scans none, AC scans (Ss > 0) the AC table.
bool scan_uses_undefined_table(Reader& r, bool progressive, const DefinedTables& defined) {
  const int len = r.get16();
  std::array<int, 12> h{};  // component count, 4 x (id, tables), Ss, Se, Ah/Al
  const int n_read = std::clamp(len - 2, 0, static_cast<int>(h.size()));
  for (int i = 0; i < n_read; ++i) h[static_cast<size_t>(i)] = r.get8();
  r.skip(len - 2 < 0 ? -1 : len - 2 - n_read);
  const int n = h[0];
  if (n < 1 || n > 4 || len != 6 + 2 * n) return false;  // stb_image stops: "bad SOS"
  const int ss = h[static_cast<size_t>(1 + 2 * n)], ah = h[static_cast<size_t>(3 + 2 * n)] >> 4;
  const bool uses_dc = !progressive || (ss == 0 && ah == 0), uses_ac = !progressive || ss > 0;
  for (int i = 0; i < n; ++i) {
    const int q = h[static_cast<size_t>(2 + 2 * i)], hd = q >> 4, ha = q & 15;
    if (hd > 3 || ha > 3) return false;  // "bad DC huff" / "bad AC huff"
    if ((uses_dc && !defined[0][hd]) || (uses_ac && !defined[1][ha])) return true;
  }
  return false;
}

// stbi__pnm_isspace
bool pnm_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// What walking the markers as stb_image does (segments by their lengths, entropy-coded
// data up to the next marker; bytes past the end read as 0) finds. The walk ends at the
// first oversized table (stb_image would write past its arrays there) or where stb_image
// would stop with an error; a scan with an undefined table is noted and the walk goes on.
struct JpegWalk {
  bool oversized_table = false;
  bool undefined_table = false;
};

JpegWalk walk_jpeg(const uint8_t* data, size_t size) {
  JpegWalk w;
  DefinedTables defined{};
  Reader r(data, size);
  if (r.marker() != kSoi) return w;
  // stbi__decode_jpeg_header: segments up to the frame header; bytes between
  // segments that do not start a marker are skipped.
  int m = r.marker();
  while (!is_sof(m)) {
    const Step s = read_segment(r, m, defined);
    w.oversized_table = s == Step::kUnsafe;
    if (s != Step::kNext) return w;
    m = r.marker();
    while (m == kNoMarker) {
      if (r.at_end()) return w;
      m = r.marker();
    }
  }
  const bool progressive = m == 0xc2;
  skip_by_length(r);
  // stbi__decode_jpeg_image: scans and the segments between them, up to EOI.
  m = r.marker();
  while (m != kEoi) {
    if (m == kSos) {
      if (scan_uses_undefined_table(r, progressive, defined)) w.undefined_table = true;
      m = r.marker_after_scan();
      if (m == kNoMarker) return w;
      continue;
    }
    if (m == kDnl) {
      skip_by_length(r);
    } else {
      const Step s = read_segment(r, m, defined);
      w.oversized_table = s == Step::kUnsafe;
      if (s != Step::kNext) return w;
    }
    m = r.marker();
  }
  return w;
}

}  // namespace

bool jpeg_huffman_tables_fit(const uint8_t* data, size_t size) { return !walk_jpeg(data, size).oversized_table; }
bool jpeg_scan_tables_defined(const uint8_t* data, size_t size) { return !walk_jpeg(data, size).undefined_table; }

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
