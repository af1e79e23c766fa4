// Writes GGUF v3 files (little-endian) for tests and tools: metadata of every value
// type, tensors from bytes in memory or produced one at a time while writing (so a
// large model never has to be held in memory at once). Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_types.h"
#include "vlkv/status.h"

namespace vlkv {

// Value builders for GgufWriter::set and for nested arrays.
GgufValue gguf_u8(uint8_t v);
GgufValue gguf_i8(int8_t v);
GgufValue gguf_u16(uint16_t v);
GgufValue gguf_i16(int16_t v);
GgufValue gguf_u32(uint32_t v);
GgufValue gguf_i32(int32_t v);
GgufValue gguf_u64(uint64_t v);
GgufValue gguf_i64(int64_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_f64(double v);
GgufValue gguf_bool(bool v);
GgufValue gguf_string(std::string v);
// Every item must have type `element_type` (checked when the file is written).
GgufValue gguf_array(GgufValueType element_type, std::vector<GgufValue> items);
GgufValue gguf_string_array(const std::vector<std::string>& items);
GgufValue gguf_f32_array(std::span<const float> items);
GgufValue gguf_i32_array(std::span<const int32_t> items);

class GgufWriter {
 public:
  // Fills one tensor's bytes at write time; `dst` holds exactly n_bytes.
  using TensorFill = std::function<Status(uint8_t* dst, size_t n_bytes)>;

  // Sets (or replaces, keeping its position) one metadata entry.
  void set(const std::string& key, GgufValue value);
  void set_u32(const std::string& key, uint32_t v) { set(key, gguf_u32(v)); }
  void set_i32(const std::string& key, int32_t v) { set(key, gguf_i32(v)); }
  void set_u64(const std::string& key, uint64_t v) { set(key, gguf_u64(v)); }
  void set_f32(const std::string& key, float v) { set(key, gguf_f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, gguf_bool(v)); }
  void set_string(const std::string& key, std::string v) { set(key, gguf_string(std::move(v))); }
  // Sets general.alignment (u32); the data section and every tensor offset use it.
  void set_alignment(uint32_t alignment) { set_u32("general.alignment", alignment); }

  // Adds a tensor whose bytes are copied now. dims in ggml order (dims[0] contiguous);
  // n_bytes must equal what type and dims imply.
  Status add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, const void* data,
                    size_t n_bytes);
  // Adds a tensor whose bytes `fill` produces when the file is written (called once per write).
  Status add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, TensorFill fill);

  Result<std::vector<uint8_t>> write_to_buffer() const;
  // Writes to `path` (replacing it); memory use is bounded by the largest tensor.
  Status write_to_file(const std::string& path) const;

  class Sink;  // where serialized bytes go (implementation detail of the .cpp)

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    uint64_t n_bytes = 0;
    std::vector<uint8_t> bytes;  // when added from memory
    TensorFill fill;             // otherwise
  };
  Status write(Sink& sink) const;
  Status add(Tensor t);

  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace vlkv
