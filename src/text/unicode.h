// UTF-8 helpers and GPT-2's byte <-> unicode mapping, with the exact conventions of
// llama.cpp's unicode.cpp (lenient decoding: a bad byte becomes U+FFFD and is skipped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vlkv::unicode {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Byte length of the UTF-8 sequence that starts with `first` (from its high nibble:
// 1 for ASCII and stray continuation bytes, 2, 3 or 4). The caller clips at the end.
size_t utf8_len(char first);

// Decodes one code point at text[*offset] and advances *offset. Malformed input
// (truncated sequence, bad continuation byte, surrogate, > U+10FFFF) yields
// U+FFFD and advances one byte.
uint32_t decode_one(std::string_view text, size_t* offset);

std::vector<uint32_t> utf8_to_cpts(std::string_view text);
void append_utf8(uint32_t cpt, std::string* out);
std::string cpts_to_utf8(const std::vector<uint32_t>& cpts);

// Re-encodes text through decode_one: valid UTF-8 comes back unchanged, each
// malformed byte becomes U+FFFD. The result is always valid UTF-8.
std::string sanitize_utf8(std::string_view text);

// The White_Space property (what llama.cpp's unicode_set_whitespace holds).
bool is_whitespace(uint32_t cpt);

// GPT-2 byte-level BPE alphabet: each byte maps to one printable code point
// (printable Latin-1 bytes map to themselves, the other 68 to U+0100..U+0143).
const std::string& byte_to_unicode(uint8_t byte);
// Inverse of byte_to_unicode for one code point's UTF-8; -1 if it is not in the alphabet.
int unicode_to_byte(std::string_view utf8);

}  // namespace vlkv::unicode
