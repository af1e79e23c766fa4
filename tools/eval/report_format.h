// Small formatting helpers for `vlkv eval`'s tables, CSV and SVG files.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace vlkv::cli {

// printf-formatted x, or "-" where it was not measured (NaN).
inline std::string fmt(double x, const char* f) {
  if (!std::isfinite(x)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

// RFC 4180 quoting where a field needs it.
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

inline std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

}  // namespace vlkv::cli
