// Little-endian byte writer and bounds-checked reader for saving KV caches to files
// (kv_sequence_io.h, docs/kv_file.md). The reader never reads past its end: a short or
// malformed input sets a sticky failure that callers turn into one clear message.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace vlkv {

// Where a ByteWriter's bytes go when they are not gathered in a string: a KV file's section
// written straight to its file (kv_file.h), so a long video's cache is never copied whole.
class ByteSink {
 public:
  virtual void append(const char* p, size_t n) = 0;

 protected:
  ~ByteSink() = default;
};

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}
  explicit ByteWriter(ByteSink* sink) : sink_(sink) {}
  template <class T>
  void put(T x) {  // an integer or floating-point value, little-endian as in memory (x86-64, ARM64)
    static_assert(std::is_arithmetic_v<T>);
    bytes(&x, sizeof x);
  }
  void bytes(const void* p, size_t n) {
    if (sink_) sink_->append(static_cast<const char*>(p), n);
    else out_->append(static_cast<const char*>(p), n);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  template <class T>
  void vec(const std::vector<T>& v) {  // a count, then the elements
    static_assert(std::is_arithmetic_v<T>);
    put<uint64_t>(v.size());
    bytes(v.data(), v.size() * sizeof(T));
  }

 private:
  std::string* out_ = nullptr;
  ByteSink* sink_ = nullptr;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool ok() const { return ok_; }
  void fail() { ok_ = false; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  bool at_end() const { return p_ == end_; }
  // n bytes, or null (and failed) when fewer are left.
  const uint8_t* take(size_t n) {
    if (!ok_ || n > left()) {
      ok_ = false;
      return nullptr;
    }
    const uint8_t* p = p_;
    p_ += n;
    return p;
  }
  template <class T>
  T get() {
    static_assert(std::is_arithmetic_v<T>);
    T x{};
    if (const uint8_t* p = take(sizeof x)) std::memcpy(&x, p, sizeof x);
    return x;
  }
  // A count written by ByteWriter::str / vec, refused above max_elements or above what the
  // remaining bytes can hold (elem_bytes each): nothing is allocated for a lying count.
  uint64_t count(uint64_t max_elements, size_t elem_bytes) {
    const uint64_t n = get<uint64_t>();
    if (!ok_ || n > max_elements || (elem_bytes > 0 && n > left() / elem_bytes)) {
      ok_ = false;
      return 0;
    }
    return n;
  }
  std::string str(uint64_t max_bytes = 1 << 20) {
    const uint64_t n = count(max_bytes, 1);
    const uint8_t* p = take(n);
    return p ? std::string(reinterpret_cast<const char*>(p), n) : std::string();
  }
  template <class T>
  std::vector<T> vec(uint64_t max_elements = uint64_t{1} << 32) {
    static_assert(std::is_arithmetic_v<T>);
    const uint64_t n = count(max_elements, sizeof(T));
    std::vector<T> v;
    const uint8_t* p = take(n * sizeof(T));
    if (p && n > 0) {  // memcpy into an empty vector's null data() is undefined even for 0 bytes
      v.resize(n);
      std::memcpy(v.data(), p, n * sizeof(T));
    }
    return v;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace vlkv
