#include "server/data_uri.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <sstream>

namespace vlkv::server {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0-63 for alphabet characters, -1 for anything else.
constexpr std::array<int8_t, 256> make_table() {
  std::array<int8_t, 256> t{};
  for (size_t i = 0; i < t.size(); ++i) t[i] = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

Result<std::vector<uint8_t>> decode_base64(std::string_view text, size_t max_bytes) {
  static const std::array<int8_t, 256> table = make_table();
  // An upper bound of the decoded size, before allocating: 3 bytes per 4 characters.
  if (text.size() / 4 * 3 > max_bytes + 3)
    return invalid_argument("base64 data decodes to more than " + std::to_string(max_bytes) + " bytes");
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int n_bits = 0;
  size_t n_pad = 0, n_chars = 0;
  for (char c : text) {
    if (is_space(c)) continue;
    if (c == '=') {
      ++n_pad;
      continue;
    }
    if (n_pad > 0) return invalid_argument("bad base64: data after '=' padding");
    const int8_t v = table[static_cast<unsigned char>(c)];
    if (v < 0) return invalid_argument("bad base64: invalid character");
    ++n_chars;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    n_bits += 6;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> n_bits));
      acc &= (1u << n_bits) - 1;
    }
  }
  if (n_chars % 4 == 1) return invalid_argument("bad base64: truncated data");
  if (n_pad > 2 || (n_pad > 0 && (n_chars + n_pad) % 4 != 0)) return invalid_argument("bad base64: wrong padding");
  if (out.size() > max_bytes)
    return invalid_argument("base64 data decodes to more than " + std::to_string(max_bytes) + " bytes");
  return out;
}

std::string encode_base64(const uint8_t* data, size_t size) {
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t b0 = data[i];
    const uint32_t b1 = i + 1 < size ? data[i + 1] : 0;
    const uint32_t b2 = i + 2 < size ? data[i + 2] : 0;
    const uint32_t v = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[v & 63] : '=';
  }
  return out;
}

Result<DataUri> parse_data_uri(std::string_view uri, size_t max_bytes) {
  constexpr std::string_view kScheme = "data:";
  if (uri.size() < kScheme.size() || uri.substr(0, kScheme.size()) != kScheme)
    return invalid_argument("not a data: URI");
  const size_t comma = uri.find(',');
  if (comma == std::string_view::npos) return invalid_argument("bad data: URI: no ',' before the payload");
  const std::string_view header = uri.substr(kScheme.size(), comma - kScheme.size());
  constexpr std::string_view kBase64 = ";base64";
  if (header.size() < kBase64.size() || header.substr(header.size() - kBase64.size()) != kBase64)
    return invalid_argument("data: URI is not base64-encoded (expected ';base64,')");
  DataUri out;
  const std::string_view type = header.substr(0, header.size() - kBase64.size());
  out.media_type = std::string(type.substr(0, type.find(';')));
  Result<std::vector<uint8_t>> bytes = decode_base64(uri.substr(comma + 1), max_bytes);
  if (!bytes.is_ok()) return bytes.status();
  out.data = std::move(bytes).value();
  if (out.data.empty()) return invalid_argument("data: URI has an empty payload");
  return out;
}

Result<std::string> image_file_data_uri(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open image");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  std::string ext = path.substr(path.find_last_of('.') + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "jpg") ext = "jpeg";
  return "data:image/" + ext + ";base64," +
         encode_base64(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace vlkv::server
