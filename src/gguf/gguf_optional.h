// Optional metadata keys: a value when the key is there, the caller's default when it is not.
#pragma once

#include <cstdint>
#include <string_view>

#include "gguf/gguf_reader.h"

namespace vlkv {

// get_i64, or fallback when the key is missing (still InvalidFile for a wrong type or range).
inline Result<int64_t> gguf_i64_or(const GgufFile& g, std::string_view key, int64_t fallback) {
  if (!g.find(key)) return fallback;
  return g.get_i64(key);
}

}  // namespace vlkv
