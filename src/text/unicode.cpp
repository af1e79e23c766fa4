#include "text/unicode.h"

#include <array>
#include <unordered_map>

namespace vlkv::unicode {

size_t utf8_len(char first) {
  static constexpr size_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[static_cast<uint8_t>(first) >> 4];
}

uint32_t decode_one(std::string_view text, size_t* offset) {
  const size_t i = *offset;
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const auto cont = [&](size_t k) { return i + k < text.size() && (byte(k) & 0xC0) == 0x80; };
  const uint8_t b0 = byte(0);
  uint32_t cpt = 0;
  size_t n = 0;
  if (b0 < 0x80) {
    cpt = b0;
    n = 1;
  } else if ((b0 & 0xE0) == 0xC0 && cont(1)) {
    cpt = ((b0 & 0x1Fu) << 6) | (byte(1) & 0x3Fu);
    n = 2;
  } else if ((b0 & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    cpt = ((b0 & 0x0Fu) << 12) | ((byte(1) & 0x3Fu) << 6) | (byte(2) & 0x3Fu);
    n = 3;
  } else if ((b0 & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    cpt = ((b0 & 0x07u) << 18) | ((byte(1) & 0x3Fu) << 12) | ((byte(2) & 0x3Fu) << 6) | (byte(3) & 0x3Fu);
    n = 4;
  }
  // llama.cpp accepts overlong forms (they re-encode to the short form); surrogates and
  // values past U+10FFFF cannot be re-encoded, so they count as malformed here.
  if (n == 0 || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) {
    *offset = i + 1;
    return kReplacementChar;
  }
  *offset = i + n;
  return cpt;
}

std::vector<uint32_t> utf8_to_cpts(std::string_view text) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) cpts.push_back(decode_one(text, &offset));
  return cpts;
}

void append_utf8(uint32_t cpt, std::string* out) {
  if (cpt <= 0x7F) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

std::string cpts_to_utf8(const std::vector<uint32_t>& cpts) {
  std::string out;
  out.reserve(cpts.size());
  for (uint32_t c : cpts) append_utf8(c, &out);
  return out;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) append_utf8(decode_one(text, &offset), &out);
  return out;
}

bool is_whitespace(uint32_t cpt) {
  switch (cpt) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cpt >= 0x2000 && cpt <= 0x200A;
  }
}

namespace {

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<std::string, uint8_t> to_byte;

  ByteTables() {
    const auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : next++;
      append_utf8(cpt, &to_unicode[b]);
      to_byte.emplace(to_unicode[b], static_cast<uint8_t>(b));
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return byte_tables().to_unicode[byte]; }

int unicode_to_byte(std::string_view utf8) {
  const auto& map = byte_tables().to_byte;
  const auto it = map.find(std::string(utf8));
  return it == map.end() ? -1 : it->second;
}

}  // namespace vlkv::unicode
