// Reads a GGUF file (versions 2 and 3) through mmap. open() validates the whole
// header — magic, version, counts, string and array lengths, tensor dims and
// types, alignment, that every tensor's bytes lie inside the file — before any
// of it is used; a hostile file yields a Status, never a crash or a huge allocation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/mapped_file.h"
#include "gguf/gguf_types.h"
#include "vlkv/status.h"

namespace vlkv {

// One metadata value. Arrays hold their element type and elements (arrays may nest).
struct GgufValue {
  struct Array {
    GgufValueType element_type = GgufValueType::kUint8;
    std::vector<GgufValue> items;
    bool operator==(const Array&) const = default;
  };
  GgufValueType type = GgufValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  // Typed accessors; nullopt-like failure is reported by the Gguf getters below.
  bool is_integer() const;
  bool is_float() const;
  bool operator==(const GgufValue&) const = default;  // deep; type and element types included
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> dims;   // ggml order: dims[0] is the contiguous (row) length
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t n_bytes = 0;        // validated against the file size
  const uint8_t* data = nullptr;  // into the mapping, valid while the GgufFile lives

  int64_t n_elements() const;
};

struct GgufLimits {
  uint64_t max_tensors = 1u << 20;
  uint64_t max_kv = 1u << 20;
  uint64_t max_string_bytes = 1u << 26;       // 64 MiB for one string (chat templates are large)
  uint64_t max_array_items = 1u << 26;        // vocabularies have ~150K entries
  uint32_t max_array_depth = 4;                // an array of arrays has depth 2
  uint32_t max_dims = 4;
  // Memory the parsed metadata may take (values are bigger than their bytes on disk);
  // bounds what a small hostile file can make us allocate.
  uint64_t max_metadata_memory = 1ull << 30;
};

class GgufFile {
 public:
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, const GgufLimits& limits = {});
  // Parses a GGUF image already in memory (fuzzing, tests). The bytes must outlive the result.
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* data, size_t size, const std::string& name,
                                                 const GgufLimits& limits = {});

  const std::string& path() const { return path_; }
  // Maps the whole file in now (MappedFile::prefault); nothing for a parsed in-memory image.
  void prefault() const;
  // Drops the resident pages of [p, p + n), bytes of this file (MappedFile::release); nothing
  // for a parsed in-memory image.
  void release(const uint8_t* p, size_t n) const;
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  // Start of the tensor data section (aligned end of the header), in bytes from the file start.
  uint64_t data_offset() const { return data_offset_; }
  // The header's bytes (magic, metadata, tensor table: everything before data_offset()).
  const uint8_t* header_data() const { return base_; }
  size_t header_size() const { return static_cast<size_t>(std::min<uint64_t>(data_offset_, size_)); }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: NotFound if missing, InvalidFile if the stored type does not convert.
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<double> get_f64(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<double>> get_f64_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_i64_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  std::unique_ptr<MappedFile> file_;
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<GgufTensorInfo> tensors_;

  // Name -> index into kv_ / tensors_; transparent so string_view lookups do not allocate.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> kv_index_;
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> tensor_index_;

  friend class GgufParser;
};

const char* gguf_value_type_name(GgufValueType type);

}  // namespace vlkv
