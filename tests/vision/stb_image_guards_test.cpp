// The pre-checks in front of stb_image 2.27. JPEG: a scan with an undefined Huffman table is
// refused (below); a DHT table of more than 256 codes
// (which stb_image would write past its Huffman arrays) is refused wherever stb_image
// would read it (before the frame, between scans) and only there (not inside an APP
// segment it skips), and real JPEGs pass. PNM: a header number that overflows an int
// is refused, real ones pass. Under `make test-sanitize` a missed input is also an
// UBSan report in stb_image (out-of-bounds index, signed overflow).
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <string>
#include <vector>

#include "vision/stb_image_guards.h"
#include "vlkv/media.h"

namespace vlkv {
namespace {

using Bytes = std::vector<uint8_t>;

// 0xff, marker, big-endian length (payload + 2), payload.
// (Built by reserve + push_back: GCC 12's -Warray-bounds misfires on insert into a short vector.)
Bytes segment(uint8_t marker, const Bytes& payload) {
  const size_t len = payload.size() + 2;
  Bytes b;
  b.reserve(len + 2);
  for (uint8_t x : {uint8_t{0xff}, marker, static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len)}) b.push_back(x);
  for (uint8_t x : payload) b.push_back(x);
  return b;
}

// One DHT table: class/id byte, 16 code-length counts, then one symbol per code.
Bytes dht_table(uint8_t class_id, const std::array<uint8_t, 16>& counts) {
  Bytes b = {class_id};
  int n = 0;
  for (uint8_t c : counts) {
    b.push_back(c);
    n += c;
  }
  b.resize(b.size() + static_cast<size_t>(n), 0x01);
  return b;
}

Bytes operator+(Bytes a, const Bytes& b) {
  a.reserve(a.size() + b.size());
  for (uint8_t x : b) a.push_back(x);
  return a;
}

const Bytes kSoi = {0xff, 0xd8};
const Bytes kEoi = {0xff, 0xd9};
// 257 codes: one more than a table can hold (the counts of lengths 15 and 16).
const Bytes kBadDht = segment(0xc4, dht_table(0x00, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 255}));
// Exactly 256 codes: the most a table holds.
const Bytes kFullDht = segment(0xc4, dht_table(0x10, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 255}));
// SOF0 of an 8x8 one-component image, then a scan header for that component.
const Bytes kSof = segment(0xc0, {8, 0, 8, 0, 8, 1, 1, 0x11, 0});
const Bytes kSos = segment(0xda, {1, 1, 0x00, 0, 63, 0});
// Entropy-coded bytes with a stuffed 0xff (ff 00), a restart marker and fill bytes.
const Bytes kScanData = {0x12, 0xff, 0x00, 0x34, 0xff, 0xd0, 0x56, 0xff, 0xff};

bool fits(const Bytes& b) { return jpeg_huffman_tables_fit(b.data(), b.size()); }

TEST(JpegHuffmanGuard, RefusesAnOversizedTableBeforeTheFrame) {
  EXPECT_FALSE(fits(kSoi + kBadDht + kSof + kSos + kScanData + kEoi));
  EXPECT_TRUE(fits(kSoi + kFullDht + kSof + kSos + kScanData + kEoi));
  // The bad table as the second one of a DHT segment holding two.
  const Bytes two = segment(0xc4, dht_table(0x01, {0, 1}) + dht_table(0x11, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                             0, 0, 2, 255}));
  EXPECT_FALSE(fits(kSoi + two + kSof));
  // After padding between segments (stb_image skips it before the frame, not right after SOI).
  const Bytes app0 = segment(0xe0, {'J', 'F', 'I', 'F', 0, 1, 2});
  EXPECT_FALSE(fits(kSoi + app0 + Bytes{0x00, 0x17} + kBadDht + kSof));
  EXPECT_TRUE(fits(kSoi + Bytes{0x00, 0x17} + kBadDht + kSof));
}

TEST(JpegHuffmanGuard, RefusesAnOversizedTableBetweenScans) {
  // A progressive JPEG defines tables between scans, after entropy-coded data.
  EXPECT_FALSE(fits(kSoi + kFullDht + kSof + kSos + kScanData + kBadDht + kSos + kEoi));
  EXPECT_TRUE(fits(kSoi + kFullDht + kSof + kSos + kScanData + kFullDht + kSos + kEoi));
}

TEST(JpegHuffmanGuard, IgnoresBytesStbImageDoesNotReadAsTables) {
  // A bad table inside an APP1 payload (skipped by its length), after EOI, or in a PNG.
  EXPECT_TRUE(fits(kSoi + segment(0xe1, kBadDht) + kFullDht + kSof + kSos + kScanData + kEoi));
  EXPECT_TRUE(fits(kSoi + kFullDht + kSof + kSos + kScanData + kEoi + kBadDht));
  EXPECT_TRUE(fits(Bytes{0x89, 'P', 'N', 'G'} + kBadDht));
  // A table whose class byte stb_image rejects stops it before any table is built.
  EXPECT_TRUE(fits(kSoi + segment(0xc4, dht_table(0x24, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 255}))));
  EXPECT_TRUE(fits({}));
}

TEST(JpegHuffmanGuard, DecodeImageRefusesTheTableWithAClearError) {
  const Bytes bad = kSoi + kBadDht + kSof + kSos + kScanData + kEoi;
  Result<Image> img = decode_image(bad.data(), bad.size());
  ASSERT_FALSE(img.is_ok());
  EXPECT_EQ(img.status().code(), StatusCode::kInvalidFile);
  EXPECT_NE(img.status().message().find("Huffman table"), std::string::npos) << img.status().message();
}

TEST(JpegHuffmanGuard, RealJpegsPassAndDecode) {
  // The image fuzzer's seeds (made by ffmpeg: fuzz/make_image_seeds.sh).
  for (const char* name : {"rgb16x8.jpg", "gray8x8.jpg"}) {
    const std::string path = std::string(VLKV_SOURCE_DIR) + "/fuzz/corpus/image/" + name;
    std::ifstream f(path, std::ios::binary);
    const Bytes b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(b.empty()) << path;
    EXPECT_TRUE(fits(b)) << name;
    Result<Image> img = decode_image(b.data(), b.size());
    ASSERT_TRUE(img.is_ok()) << name << ": " << img.status().message();
    EXPECT_TRUE(img->valid());
  }
}

// A scan decoding with a Huffman table no DHT defined (stb_image would read its
// uninitialized code limits and index past them: UBSan, index 18 out of bounds, found by
// the image fuzzer) is refused; which tables a scan uses follows stb_image's decoder.
bool tables_defined(const Bytes& b) { return jpeg_scan_tables_defined(b.data(), b.size()); }
const Bytes kDcDht = segment(0xc4, dht_table(0x00, {1}));  // DC table 0
const Bytes kAcDht = segment(0xc4, dht_table(0x10, {1}));  // AC table 0
const Bytes kSof2 = segment(0xc2, {8, 0, 8, 0, 8, 1, 1, 0x11, 0});  // progressive
Bytes sos(uint8_t tables, uint8_t ss, uint8_t se, uint8_t a) { return segment(0xda, {1, 1, tables, ss, se, a}); }

TEST(JpegScanTableGuard, RefusesAScanWithAnUndefinedTable) {
  // Sequential: both tables of the component, defined before the scan.
  EXPECT_TRUE(tables_defined(kSoi + kDcDht + kAcDht + kSof + kSos + kScanData + kEoi));
  EXPECT_FALSE(tables_defined(kSoi + kAcDht + kSof + kSos + kScanData + kEoi));
  EXPECT_FALSE(tables_defined(kSoi + kDcDht + kSof + kSos + kScanData + kEoi));
  EXPECT_FALSE(tables_defined(kSoi + kDcDht + kAcDht + kSof + sos(0x01, 0, 63, 0) + kScanData + kEoi));  // AC 1
  // A table defined between scans serves the later scan only.
  EXPECT_FALSE(tables_defined(kSoi + kDcDht + kSof + kSos + kScanData + kAcDht + kSos + kEoi));
  // Progressive: a DC-first scan needs only its DC table, a DC refinement none, an AC scan its AC table.
  EXPECT_TRUE(tables_defined(kSoi + kDcDht + kSof2 + sos(0x00, 0, 0, 0x01) + kScanData + kEoi));
  EXPECT_FALSE(tables_defined(kSoi + kAcDht + kSof2 + sos(0x00, 0, 0, 0x01) + kScanData + kEoi));
  EXPECT_TRUE(tables_defined(kSoi + kSof2 + sos(0x00, 0, 0, 0x10) + kScanData + kEoi));
  EXPECT_TRUE(tables_defined(kSoi + kDcDht + kSof2 + sos(0x00, 0, 0, 0) + kScanData + kAcDht + sos(0x00, 1, 63, 0) +
                             kScanData + kEoi));
  EXPECT_FALSE(tables_defined(kSoi + kDcDht + kSof2 + sos(0x00, 0, 0, 0) + kScanData + sos(0x00, 1, 63, 0) + kEoi));
  // Scan headers stb_image refuses itself, and data that is not a JPEG.
  EXPECT_TRUE(tables_defined(kSoi + kSof + segment(0xda, {1, 1, 0x00, 0, 63}) + kEoi));  // bad SOS length
  EXPECT_TRUE(tables_defined(kSoi + kSof + sos(0x40, 0, 63, 0) + kEoi));                   // DC table id 4
  EXPECT_TRUE(tables_defined(Bytes{0x89, 'P', 'N', 'G'} + kSos));
  EXPECT_TRUE(tables_defined({}));
}

TEST(JpegScanTableGuard, TheFuzzersFindIsRefusedWithAClearErrorAndRealJpegsPass) {
  for (const char* name : {"regress_undefined_huffman_table.jpg", "rgb16x8.jpg", "gray8x8.jpg"}) {
    const std::string path = std::string(VLKV_SOURCE_DIR) + "/fuzz/corpus/image/" + name;
    std::ifstream f(path, std::ios::binary);
    const Bytes b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(b.empty()) << path;
    const bool regress = name[0] == 'r' && name[1] == 'e';
    EXPECT_EQ(tables_defined(b), !regress) << name;
    Result<Image> img = decode_image(b.data(), b.size());
    EXPECT_EQ(img.is_ok(), !regress) << name;
    if (regress) {
      EXPECT_EQ(img.status().code(), StatusCode::kInvalidFile);
      EXPECT_NE(img.status().message().find("undefined Huffman table"), std::string::npos) << img.status().message();
    }
  }
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

bool pnm_fits(const std::string& s) {
  const Bytes b = text(s);
  return pnm_header_numbers_fit(b.data(), b.size());
}

TEST(PnmHeaderGuard, RefusesHeaderNumbersThatOverflowAnInt) {
  EXPECT_FALSE(pnm_fits("P6\n44544444444444 4 255\n..."));  // the fuzzer's find, shortened
  EXPECT_FALSE(pnm_fits("P5 4 2147483648 255\n"));            // INT_MAX + 1
  EXPECT_FALSE(pnm_fits("P6 # a comment\n4\n# another\n4 99999999999\n"));
  EXPECT_TRUE(pnm_fits("P5 4 2147483647 255\n"));             // INT_MAX: stb_image's own checks refuse it
  EXPECT_TRUE(pnm_fits("P6\n# made by hand\n4 3\n255\n"));
  EXPECT_TRUE(pnm_fits("P3 44544444444444 4 255\n"));  // ASCII PNM: not read by stb_image
  EXPECT_TRUE(pnm_fits("P6"));
}

TEST(PnmHeaderGuard, DecodeImageRefusesTheHeaderWithAClearError) {
  const Bytes bad = text("P6\n44544444444444 4 255\n") + Bytes(48, 0x80);
  Result<Image> img = decode_image(bad.data(), bad.size());
  ASSERT_FALSE(img.is_ok());
  EXPECT_EQ(img.status().code(), StatusCode::kInvalidFile);
  EXPECT_NE(img.status().message().find("PNM header"), std::string::npos) << img.status().message();
  // The fuzzer's seed passes and decodes.
  std::ifstream f(std::string(VLKV_SOURCE_DIR) + "/fuzz/corpus/image/rgb4x4.ppm", std::ios::binary);
  const Bytes ppm((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(pnm_header_numbers_fit(ppm.data(), ppm.size()));
  Result<Image> good = decode_image(ppm.data(), ppm.size());
  ASSERT_TRUE(good.is_ok()) << good.status().message();
  EXPECT_EQ(good->width, 4);
}

TEST(ImageChannels, SixteenBitGreyPgmAndGreyAlphaPngBecomeRgb) {
  // 2x1 16-bit PGM (maximum 65535): stb_image 2.27 overflowed its buffer turning it into RGB.
  const Bytes pgm = text("P5 2 1 65535\n") + Bytes{0xff, 0xff, 0x00, 0x00};
  Result<Image> img = decode_image(pgm.data(), pgm.size());
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  EXPECT_EQ(img->pixels, (Bytes{255, 255, 255, 0, 0, 0}));
  // The fuzzer's seeds in 1, 3 and 4 channels give RGB of the right size.
  for (const char* name : {"gray5x3.png", "rgb8x6.png", "rgba6x4.png"}) {
    std::ifstream f(std::string(VLKV_SOURCE_DIR) + "/fuzz/corpus/image/" + name, std::ios::binary);
    const Bytes b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    Result<Image> im = decode_image(b.data(), b.size());
    ASSERT_TRUE(im.is_ok()) << name;
    EXPECT_TRUE(im->valid()) << name;
  }
}

Bytes read_seed(const std::string& name) {
  std::ifstream f(std::string(VLKV_SOURCE_DIR) + "/fuzz/corpus/image/" + name, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A PNG whose IDAT claims 0x7fffff00 bytes while the file ends after a few: stb_image 2.27
// reallocates its buffer to the claim (2 GiB) before it reads (the fuzzer's out-of-memory find).
TEST(PngChunkGuard, RefusesAChunkLongerThanTheFile) {
  const Bytes png = read_seed("rgb8x6.png");
  ASSERT_GT(png.size(), 33u);
  EXPECT_TRUE(png_chunks_fit(png.data(), png.size()));
  // Signature (8) + IHDR (4 + 4 + 13 + 4): the next chunk starts at 33.
  Bytes bomb(png.begin(), png.begin() + 33);
  for (uint8_t x : {uint8_t{0x7f}, uint8_t{0xff}, uint8_t{0xff}, uint8_t{0x00}, uint8_t{'I'}, uint8_t{'D'},
                    uint8_t{'A'}, uint8_t{'T'}, uint8_t{0x78}, uint8_t{0x9c}})
    bomb.push_back(x);
  EXPECT_FALSE(png_chunks_fit(bomb.data(), bomb.size()));
  Result<Image> img = decode_image(bomb.data(), bomb.size());
  ASSERT_FALSE(img.is_ok());
  EXPECT_EQ(img.status().code(), StatusCode::kInvalidFile);
  EXPECT_NE(img.status().message().find("chunk longer than the file"), std::string::npos) << img.status().message();
  // A real PNG cut inside its IDAT is refused too; IEND's CRC and bytes after IEND are not read.
  EXPECT_FALSE(png_chunks_fit(png.data(), png.size() - 20));
  EXPECT_TRUE(png_chunks_fit(png.data(), png.size() - 4));
  Bytes trailing = png;
  trailing.push_back(0x55);
  EXPECT_TRUE(png_chunks_fit(trailing.data(), trailing.size()));
  EXPECT_TRUE(png_chunks_fit(kSoi.data(), kSoi.size()));  // not a PNG
}

}  // namespace
}  // namespace vlkv
