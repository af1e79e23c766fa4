// A pre-check for JPEG data before stb_image sees it. stb_image 2.27 (Debian 12's
// libstb-dev) builds a Huffman table from a DHT segment without checking that its 16
// code-length counts add up to at most 256, and writes one byte per code into 257-
// and 256-byte arrays: a crafted DHT overwrites the decoder's state (found by
// fuzz/image_fuzzer; stb_image 2.28 rejects such tables itself).
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

}  // namespace vlkv
