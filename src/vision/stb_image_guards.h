// Pre-checks for inputs that stb_image 2.27 (Debian 12's libstb-dev) mishandles, run
// before stb_image sees the data. All were found by fuzz/image_fuzzer; stb_image 2.28
// rejects the oversized table, PNM and PNG inputs itself (the undefined table: not known).
// - JPEG: a DHT segment's 16 code-length counts may add up to more than 256; stb_image
//   writes one byte per code into 257- and 256-byte arrays, over the decoder's state.
// - JPEG: a scan may decode with a Huffman table no DHT defined; stb_image's decoder state
//   is not zeroed, so it reads garbage code limits and indexes past its arrays.
// - PNM (P5/P6): a header number of more than 10 digits overflows stb_image's int
//   (signed overflow: undefined behaviour).
// - PNG: an IDAT chunk's 32-bit length is trusted before its bytes are read; stb_image
//   grows its buffer to it (up to 4 GiB for a 100-byte file: a memory bomb).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vlkv {

// False when stb_image, reading `data` as a JPEG, could build a Huffman table of more
// than 256 codes. Walks the markers as stb_image does (segments by their lengths,
// entropy-coded data up to the next marker; bytes past the end read as 0) and checks
// every DHT it would reach; where stb_image would stop with an error, so does the walk.
// Data that is not a JPEG (no SOI) is true: stb_image does not read it as one.
bool jpeg_huffman_tables_fit(const uint8_t* data, size_t size);

// False when a scan stb_image would decode, reading `data` as a JPEG, uses a DC or AC
// Huffman table that no DHT before it defined (the same walk as jpeg_huffman_tables_fit;
// which tables a scan uses: see stb_image_guards.cpp). Data that is not a JPEG is true.
bool jpeg_scan_tables_defined(const uint8_t* data, size_t size);

// False when stb_image, reading `data` as a P5/P6 PNM, would overflow an int while
// reading the header's width, height or maximum value (read as stb_image does: blanks
// and # comments between them). Data that is not a P5/P6 PNM is true.
bool pnm_header_numbers_fit(const uint8_t* data, size_t size);

// False when a chunk of `data`, read as a PNG, claims more bytes (data + CRC) than the
// file has after its header. Data that is not a PNG (no signature) is true.
bool png_chunks_fit(const uint8_t* data, size_t size);

}  // namespace vlkv
