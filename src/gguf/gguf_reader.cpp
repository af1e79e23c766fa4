// GgufFile::open/parse: a bounds-checked walk over the header. Every count is
// checked against the bytes that remain before anything is reserved or allocated.
#include "gguf/gguf_reader.h"

#include <cstring>
#include <limits>
#include <string>

#include "gguf/ggml_type_info.h"

namespace vlkv {

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint64_t kDefaultAlignment = 32;

// Smallest encodings, used to reject counts that cannot fit in the remaining bytes.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;            // key length, 1-byte key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, one dim, type, offset

// Rough heap cost of one parsed value (used for the metadata memory budget).
constexpr uint64_t kValueCost = sizeof(GgufValue);

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

// Bytes of one scalar on disk; 0 for string/array (variable length).
uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16: case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32: case GgufValueType::kInt32: case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64: case GgufValueType::kInt64: case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString: case GgufValueType::kArray: return 0;
  }
  return 0;
}

// Smallest on-disk size of one array item of this type.
uint64_t min_item_size(GgufValueType t) {
  if (t == GgufValueType::kString) return 8;      // length only (empty string)
  if (t == GgufValueType::kArray) return 4 + 8;   // element type + count (empty array)
  return scalar_size(t);
}

}  // namespace

// The parser: one pass, a cursor over [base, base + size). Reads never pass `size`.
class GgufParser {
 public:
  GgufParser(GgufFile& f, const GgufLimits& limits) : f_(f), limits_(limits) {}

  Status run();

 private:
  uint64_t remaining() const { return f_.size_ - pos_; }
  Status fail(const std::string& what) const { return invalid_file(f_.path_ + ": " + what); }
  Status truncated(const char* what) const {
    return fail(std::string("truncated: ") + what + " at offset " + std::to_string(pos_) +
                " runs past the end of the file (size " + std::to_string(f_.size_) + ")");
  }

  Status read_bytes(void* dst, uint64_t n, const char* what) {
    if (n > remaining()) return truncated(what);
    if (n) std::memcpy(dst, f_.base_ + pos_, n);
    pos_ += n;
    return Status::ok();
  }
  template <typename U>
  Status read(U* v, const char* what) { return read_bytes(v, sizeof(U), what); }
  // Reads one little-endian U and stores it widened to Store (uint64_t, int64_t or double).
  template <typename U, typename Store>
  Status read_scalar(GgufValue* out, const char* what) {
    U v{};
    VLKV_RETURN_IF_ERROR(read(&v, what));
    out->data = static_cast<Store>(v);
    return Status::ok();
  }

  Status read_string(std::string* s, const char* what);
  Status read_value(GgufValueType type, GgufValue* out, uint32_t depth, const std::string& key);
  Status charge(uint64_t bytes, const std::string& key);
  Status read_kv(uint64_t index);
  Status read_tensor_info(uint64_t index);
  Status apply_alignment();
  Status place_tensors();

  GgufFile& f_;
  const GgufLimits& limits_;
  uint64_t pos_ = 0;
  uint64_t memory_used_ = 0;
};

Status GgufParser::read_string(std::string* s, const char* what) {
  uint64_t len = 0;
  VLKV_RETURN_IF_ERROR(read(&len, what));
  if (len > limits_.max_string_bytes) {
    return fail(std::string(what) + " at offset " + std::to_string(pos_ - 8) + " has length " +
                std::to_string(len) + " (limit " + std::to_string(limits_.max_string_bytes) + ")");
  }
  if (len > remaining()) {
    return fail(std::string(what) + " at offset " + std::to_string(pos_ - 8) + " has length " +
                std::to_string(len) + " but only " + std::to_string(remaining()) + " bytes remain");
  }
  s->assign(reinterpret_cast<const char*>(f_.base_ + pos_), static_cast<size_t>(len));
  pos_ += len;
  return Status::ok();
}

Status GgufParser::charge(uint64_t bytes, const std::string& key) {
  memory_used_ += bytes;  // cannot overflow: each charge is bounded by file size * small factor
  if (memory_used_ > limits_.max_metadata_memory) {
    return fail("metadata key '" + key + "' takes the parsed metadata past the memory limit of " +
                std::to_string(limits_.max_metadata_memory) + " bytes");
  }
  return Status::ok();
}

Status GgufParser::read_value(GgufValueType type, GgufValue* out, uint32_t depth, const std::string& key) {
  out->type = type;
  switch (type) {
    case GgufValueType::kUint8: return read_scalar<uint8_t, uint64_t>(out, "u8 value");
    case GgufValueType::kUint16: return read_scalar<uint16_t, uint64_t>(out, "u16 value");
    case GgufValueType::kUint32: return read_scalar<uint32_t, uint64_t>(out, "u32 value");
    case GgufValueType::kUint64: return read_scalar<uint64_t, uint64_t>(out, "u64 value");
    case GgufValueType::kInt8: return read_scalar<int8_t, int64_t>(out, "i8 value");
    case GgufValueType::kInt16: return read_scalar<int16_t, int64_t>(out, "i16 value");
    case GgufValueType::kInt32: return read_scalar<int32_t, int64_t>(out, "i32 value");
    case GgufValueType::kInt64: return read_scalar<int64_t, int64_t>(out, "i64 value");
    case GgufValueType::kFloat32: return read_scalar<float, double>(out, "f32 value");
    case GgufValueType::kFloat64: return read_scalar<double, double>(out, "f64 value");
    case GgufValueType::kBool: {
      uint8_t v = 0;
      VLKV_RETURN_IF_ERROR(read(&v, "bool value"));
      if (v > 1) return fail("key '" + key + "': bool value " + std::to_string(v) + " is neither 0 nor 1");
      out->data = v != 0;
      break;
    }
    case GgufValueType::kString: {
      std::string s;
      VLKV_RETURN_IF_ERROR(read_string(&s, "string value"));
      VLKV_RETURN_IF_ERROR(charge(s.size(), key));
      out->data = std::move(s);
      break;
    }
    case GgufValueType::kArray: {
      if (depth >= limits_.max_array_depth) {
        return fail("key '" + key + "': arrays nest deeper than " + std::to_string(limits_.max_array_depth));
      }
      uint32_t elem_raw = 0;
      uint64_t n = 0;
      VLKV_RETURN_IF_ERROR(read(&elem_raw, "array element type"));
      if (!valid_value_type(elem_raw)) {
        return fail("key '" + key + "': unknown array element type " + std::to_string(elem_raw));
      }
      VLKV_RETURN_IF_ERROR(read(&n, "array length"));
      const GgufValueType elem = static_cast<GgufValueType>(elem_raw);
      if (n > limits_.max_array_items) {
        return fail("key '" + key + "': array length " + std::to_string(n) + " exceeds the limit " +
                    std::to_string(limits_.max_array_items));
      }
      if (n > remaining() / min_item_size(elem)) {
        return fail("key '" + key + "': array of " + std::to_string(n) + " " + gguf_value_type_name(elem) +
                    " items cannot fit in the " + std::to_string(remaining()) + " bytes that remain");
      }
      VLKV_RETURN_IF_ERROR(charge(n * kValueCost, key));
      GgufValue::Array arr;
      arr.element_type = elem;
      arr.items.resize(static_cast<size_t>(n));
      for (GgufValue& item : arr.items) {
        VLKV_RETURN_IF_ERROR(read_value(elem, &item, depth + 1, key));
      }
      out->data = std::move(arr);
      break;
    }
    default:
      return fail("key '" + key + "': unknown value type " + std::to_string(static_cast<uint32_t>(type)));
  }
  return Status::ok();
}

Status GgufParser::read_kv(uint64_t index) {
  const uint64_t at = pos_;
  std::string key;
  VLKV_RETURN_IF_ERROR(read_string(&key, "metadata key"));
  if (key.empty()) {
    return fail("metadata entry " + std::to_string(index) + " at offset " + std::to_string(at) + " has an empty key");
  }
  if (f_.kv_index_.count(key)) return fail("duplicate metadata key '" + key + "'");
  uint32_t type_raw = 0;
  VLKV_RETURN_IF_ERROR(read(&type_raw, "metadata value type"));
  if (!valid_value_type(type_raw)) {
    return fail("key '" + key + "' has unknown value type " + std::to_string(type_raw));
  }
  VLKV_RETURN_IF_ERROR(charge(kValueCost + key.size() * 2, key));
  GgufValue value;
  VLKV_RETURN_IF_ERROR(read_value(static_cast<GgufValueType>(type_raw), &value, 0, key));
  f_.kv_index_.emplace(key, f_.kv_.size());
  f_.kv_.emplace_back(std::move(key), std::move(value));
  return Status::ok();
}

Status GgufParser::read_tensor_info(uint64_t index) {
  GgufTensorInfo t;
  VLKV_RETURN_IF_ERROR(read_string(&t.name, "tensor name"));
  if (t.name.empty()) return fail("tensor " + std::to_string(index) + " has an empty name");
  const std::string q = "tensor '" + t.name + "'";
  if (f_.tensor_index_.count(t.name)) return fail("duplicate " + q);
  uint32_t n_dims = 0;
  VLKV_RETURN_IF_ERROR(read(&n_dims, "tensor n_dims"));
  if (n_dims < 1 || n_dims > limits_.max_dims) {
    return fail(q + " has " + std::to_string(n_dims) + " dims (must be 1.." + std::to_string(limits_.max_dims) + ")");
  }
  t.dims.resize(n_dims);
  int64_t n_elements = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    uint64_t d = 0;
    VLKV_RETURN_IF_ERROR(read(&d, "tensor dim"));
    if (d == 0 || d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail(q + " dim " + std::to_string(i) + " is " + std::to_string(static_cast<int64_t>(d)) +
                  " (must be positive)");
    }
    t.dims[i] = static_cast<int64_t>(d);
    if (n_elements > std::numeric_limits<int64_t>::max() / t.dims[i]) {
      return fail(q + ": element count overflows int64");
    }
    n_elements *= t.dims[i];
  }
  uint32_t type_raw = 0;
  VLKV_RETURN_IF_ERROR(read(&type_raw, "tensor type"));
  const GgmlTypeInfo* info = ggml_type_info(type_raw);
  if (!info) return fail(q + " has unknown ggml type id " + std::to_string(type_raw));
  t.type = info->type;
  if (t.dims[0] % info->block_elems != 0) {
    return fail(q + " row length " + std::to_string(t.dims[0]) + " is not a multiple of the " + info->name +
                " block size " + std::to_string(info->block_elems));
  }
  const uint64_t n_blocks = static_cast<uint64_t>(n_elements / info->block_elems);
  if (n_blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes) {
    return fail(q + ": byte count overflows");
  }
  t.n_bytes = n_blocks * info->block_bytes;
  VLKV_RETURN_IF_ERROR(read(&t.offset, "tensor offset"));
  VLKV_RETURN_IF_ERROR(charge(sizeof(GgufTensorInfo) + t.name.size() * 2 + n_dims * 8, t.name));
  f_.tensor_index_.emplace(t.name, f_.tensors_.size());
  f_.tensors_.push_back(std::move(t));
  return Status::ok();
}

Status GgufParser::apply_alignment() {
  f_.alignment_ = kDefaultAlignment;
  const GgufValue* v = f_.find("general.alignment");
  if (!v) return Status::ok();
  uint64_t a = 0;
  if (const uint64_t* u = std::get_if<uint64_t>(&v->data)) {
    a = *u;
  } else if (const int64_t* s = std::get_if<int64_t>(&v->data); s && *s > 0) {
    a = static_cast<uint64_t>(*s);
  } else if (!v->is_integer()) {
    return fail(std::string("general.alignment has type ") + gguf_value_type_name(v->type) + ", expected u32");
  }
  if (a == 0 || (a & (a - 1)) != 0) {
    return fail("general.alignment " + std::to_string(a) + " is not a nonzero power of two");
  }
  f_.alignment_ = a;
  return Status::ok();
}

Status GgufParser::place_tensors() {
  // Data section: the header end rounded up to the alignment (overflow-checked).
  const uint64_t a = f_.alignment_;
  const uint64_t rem = pos_ % a;
  uint64_t data = pos_;
  if (rem != 0) {
    if (a - rem > std::numeric_limits<uint64_t>::max() - pos_) return fail("data section offset overflows");
    data += a - rem;
  }
  f_.data_offset_ = data;
  const uint64_t size = f_.size_;
  for (GgufTensorInfo& t : f_.tensors_) {
    const std::string q = "tensor '" + t.name + "'";
    if (t.offset % a != 0) {
      return fail(q + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                  std::to_string(a));
    }
    const bool begin_ok = t.offset <= std::numeric_limits<uint64_t>::max() - data;
    const uint64_t begin = begin_ok ? data + t.offset : 0;
    const bool end_ok = begin_ok && t.n_bytes <= std::numeric_limits<uint64_t>::max() - begin;
    if (!end_ok) {
      return fail(q + " data offset " + std::to_string(t.offset) + " + " + std::to_string(t.n_bytes) +
                  " bytes overflows");
    }
    const uint64_t end = begin + t.n_bytes;
    if (end > size) {
      return fail(q + " bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") lie outside the file (size " + std::to_string(size) + ")");
    }
    t.data = f_.base_ + begin;
  }
  return Status::ok();
}

Status GgufParser::run() {
  uint8_t magic[4];
  VLKV_RETURN_IF_ERROR(read_bytes(magic, 4, "magic"));
  if (std::memcmp(magic, kMagic, 4) != 0) {
    return fail("not a GGUF file (magic is not \"GGUF\")");
  }
  uint32_t version = 0;
  VLKV_RETURN_IF_ERROR(read(&version, "version"));
  if (version == 2 || version == 3) {
    f_.version_ = version;
  } else if (version == 1) {
    return unsupported(f_.path_ + ": GGUF version 1 is not supported (only versions 2 and 3)");
  } else if ((version & 0xffffu) == 0 && (version >> 16) != 0) {
    return unsupported(f_.path_ + ": big-endian GGUF files are not supported");
  } else {
    return unsupported(f_.path_ + ": unknown GGUF version " + std::to_string(version) + " (only 2 and 3)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  VLKV_RETURN_IF_ERROR(read(&n_tensors, "tensor count"));
  VLKV_RETURN_IF_ERROR(read(&n_kv, "metadata count"));
  if (n_tensors > limits_.max_tensors) {
    return fail("tensor count " + std::to_string(n_tensors) + " exceeds the limit " +
                std::to_string(limits_.max_tensors));
  }
  if (n_kv > limits_.max_kv) {
    return fail("metadata count " + std::to_string(n_kv) + " exceeds the limit " + std::to_string(limits_.max_kv));
  }
  // Each count must fit on its own (compared by division: no overflow whatever the limits),
  // then both together; nothing is reserved before this.
  const uint64_t rem = remaining();
  if (n_kv > rem / kMinKvBytes || n_tensors > rem / kMinTensorInfoBytes ||
      n_kv * kMinKvBytes > rem - n_tensors * kMinTensorInfoBytes) {
    return fail(std::to_string(n_tensors) + " tensors and " + std::to_string(n_kv) +
                " metadata entries cannot fit in the " + std::to_string(rem) + " bytes after the header");
  }
  for (uint64_t i = 0; i < n_kv; ++i) VLKV_RETURN_IF_ERROR(read_kv(i));
  VLKV_RETURN_IF_ERROR(apply_alignment());
  f_.tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) VLKV_RETURN_IF_ERROR(read_tensor_info(i));
  return place_tensors();
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name,
                                                  const GgufLimits& limits) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->base_ = data;
  f->size_ = data ? size : 0;
  GgufParser parser(*f, limits);
  VLKV_RETURN_IF_ERROR(parser.run());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, const GgufLimits& limits) {
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::open(path));
  const uint8_t* data = mapped->data();
  const size_t size = mapped->size();
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, parse(data, size, path, limits));
  f->file_ = std::move(mapped);
  return f;
}

void GgufFile::release(const uint8_t* p, size_t n) const {
  if (file_) file_->release(p, n);
}

void GgufFile::prefault() const {
  if (file_) file_->prefault();
}

}  // namespace vlkv
