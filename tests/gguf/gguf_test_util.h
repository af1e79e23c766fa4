// Test helpers: a raw little-endian GGUF byte builder for crafting valid and broken files.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace vlkv::testing {

struct RawGguf {
  std::vector<uint8_t> b;

  RawGguf& bytes(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  template <typename U>
  RawGguf& put(U v) { return bytes(&v, sizeof(v)); }
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& str(const std::string& s) { u64(s.size()); return bytes(s.data(), s.size()); }
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes("GGUF", 4);
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  // key + type + u32 value
  RawGguf& kv_u32(const std::string& key, uint32_t v) { str(key); u32(4); return u32(v); }
  RawGguf& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    u32(type);
    return u64(offset);
  }
  RawGguf& pad_to(size_t a) {
    while (b.size() % a) b.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

}  // namespace vlkv::testing
