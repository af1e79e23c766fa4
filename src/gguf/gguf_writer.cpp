#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_set>

#include "gguf/ggml_type_info.h"

namespace vlkv {

namespace {

GgufValue make(GgufValueType type, decltype(GgufValue::data) data) {
  GgufValue v;
  v.type = type;
  v.data = std::move(data);
  return v;
}

}  // namespace

GgufValue gguf_u8(uint8_t v) { return make(GgufValueType::kUint8, uint64_t{v}); }
GgufValue gguf_i8(int8_t v) { return make(GgufValueType::kInt8, int64_t{v}); }
GgufValue gguf_u16(uint16_t v) { return make(GgufValueType::kUint16, uint64_t{v}); }
GgufValue gguf_i16(int16_t v) { return make(GgufValueType::kInt16, int64_t{v}); }
GgufValue gguf_u32(uint32_t v) { return make(GgufValueType::kUint32, uint64_t{v}); }
GgufValue gguf_i32(int32_t v) { return make(GgufValueType::kInt32, int64_t{v}); }
GgufValue gguf_u64(uint64_t v) { return make(GgufValueType::kUint64, v); }
GgufValue gguf_i64(int64_t v) { return make(GgufValueType::kInt64, v); }
GgufValue gguf_f32(float v) { return make(GgufValueType::kFloat32, double{v}); }
GgufValue gguf_f64(double v) { return make(GgufValueType::kFloat64, v); }
GgufValue gguf_bool(bool v) { return make(GgufValueType::kBool, v); }
GgufValue gguf_string(std::string v) { return make(GgufValueType::kString, std::move(v)); }

GgufValue gguf_array(GgufValueType element_type, std::vector<GgufValue> items) {
  GgufValue::Array a;
  a.element_type = element_type;
  a.items = std::move(items);
  return make(GgufValueType::kArray, std::move(a));
}

GgufValue gguf_string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (const std::string& s : items) v.push_back(gguf_string(s));
  return gguf_array(GgufValueType::kString, std::move(v));
}

GgufValue gguf_f32_array(std::span<const float> items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (float x : items) v.push_back(gguf_f32(x));
  return gguf_array(GgufValueType::kFloat32, std::move(v));
}

GgufValue gguf_i32_array(std::span<const int32_t> items) {
  std::vector<GgufValue> v;
  v.reserve(items.size());
  for (int32_t x : items) v.push_back(gguf_i32(x));
  return gguf_array(GgufValueType::kInt32, std::move(v));
}

// Where serialized bytes go: a growing vector or a buffered FILE*.
class GgufWriter::Sink {
 public:
  virtual ~Sink() = default;
  virtual Status put(const void* data, size_t n) = 0;
  uint64_t written() const { return written_; }

  template <typename U>
  Status put_le(U v) { return put(&v, sizeof(v)); }  // hosts are little-endian (x86-64, arm64)
  Status put_string(const std::string& s) {
    VLKV_RETURN_IF_ERROR(put_le<uint64_t>(s.size()));
    return put(s.data(), s.size());
  }
  Status pad_to(uint64_t alignment) {
    static constexpr uint8_t kZeros[256] = {};
    while (written_ % alignment != 0) {
      const uint64_t n = std::min<uint64_t>(alignment - written_ % alignment, sizeof(kZeros));
      VLKV_RETURN_IF_ERROR(put(kZeros, n));
    }
    return Status::ok();
  }

 protected:
  uint64_t written_ = 0;
};

namespace {

class VectorSink final : public GgufWriter::Sink {
 public:
  Status put(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
    written_ += n;
    return Status::ok();
  }
  std::vector<uint8_t> bytes;
};

class FileSink final : public GgufWriter::Sink {
 public:
  FileSink(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  Status put(const void* data, size_t n) override {
    if (n && std::fwrite(data, 1, n, f_) != n) return io_error(path_ + ": write failed: " + std::strerror(errno));
    written_ += n;
    return Status::ok();
  }

 private:
  std::FILE* f_;
  std::string path_;
};

// Checks that a value's items match their declared element types, recursively.
Status check_value(const std::string& key, const GgufValue& v) {
  const auto* a = std::get_if<GgufValue::Array>(&v.data);
  if ((v.type == GgufValueType::kArray) != (a != nullptr)) {
    return invalid_argument("key '" + key + "': value type does not match its data");
  }
  if (!a) return Status::ok();
  for (const GgufValue& item : a->items) {
    if (item.type != a->element_type) {
      return invalid_argument("key '" + key + "': array of " + gguf_value_type_name(a->element_type) +
                              " holds a " + gguf_value_type_name(item.type));
    }
    VLKV_RETURN_IF_ERROR(check_value(key, item));
  }
  return Status::ok();
}

template <typename U, typename V>
Status put_num(GgufWriter::Sink& sink, const V* v) {
  if (!v) return invalid_argument("value type does not match its data");
  return sink.put_le(static_cast<U>(*v));
}

Status put_value(GgufWriter::Sink& sink, const GgufValue& v) {
  const auto* u = std::get_if<uint64_t>(&v.data);
  const auto* i = std::get_if<int64_t>(&v.data);
  const auto* d = std::get_if<double>(&v.data);
  switch (v.type) {
    case GgufValueType::kUint8: return put_num<uint8_t>(sink, u);
    case GgufValueType::kUint16: return put_num<uint16_t>(sink, u);
    case GgufValueType::kUint32: return put_num<uint32_t>(sink, u);
    case GgufValueType::kUint64: return put_num<uint64_t>(sink, u);
    case GgufValueType::kInt8: return put_num<int8_t>(sink, i);
    case GgufValueType::kInt16: return put_num<int16_t>(sink, i);
    case GgufValueType::kInt32: return put_num<int32_t>(sink, i);
    case GgufValueType::kInt64: return put_num<int64_t>(sink, i);
    case GgufValueType::kFloat32: return put_num<float>(sink, d);
    case GgufValueType::kFloat64: return put_num<double>(sink, d);
    case GgufValueType::kBool: {
      const auto* b = std::get_if<bool>(&v.data);
      if (!b) return invalid_argument("value type does not match its data");
      return sink.put_le<uint8_t>(*b ? 1 : 0);
    }
    case GgufValueType::kString: {
      const auto* s = std::get_if<std::string>(&v.data);
      if (!s) return invalid_argument("value type does not match its data");
      return sink.put_string(*s);
    }
    case GgufValueType::kArray: {
      const auto& a = std::get<GgufValue::Array>(v.data);  // checked by check_value
      VLKV_RETURN_IF_ERROR(sink.put_le<uint32_t>(static_cast<uint32_t>(a.element_type)));
      VLKV_RETURN_IF_ERROR(sink.put_le<uint64_t>(a.items.size()));
      for (const GgufValue& item : a.items) VLKV_RETURN_IF_ERROR(put_value(sink, item));
      return Status::ok();
    }
  }
  return invalid_argument("unknown value type");
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

Status GgufWriter::add(Tensor t) {
  if (t.name.empty()) return invalid_argument("tensor name is empty");
  for (const Tensor& other : tensors_) {
    if (other.name == t.name) return invalid_argument("duplicate tensor '" + t.name + "'");
  }
  if (t.dims.empty() || t.dims.size() > 4) {
    return invalid_argument("tensor '" + t.name + "' has " + std::to_string(t.dims.size()) + " dims (1..4)");
  }
  Result<uint64_t> n = ggml_tensor_bytes(t.type, t.dims);
  if (!n.is_ok()) return n.status().with_context("tensor '" + t.name + "'");
  t.n_bytes = *n;
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, const void* data,
                              size_t n_bytes) {
  Tensor t{name, type, std::move(dims), 0, {}, nullptr};
  const Result<uint64_t> expected = ggml_tensor_bytes(type, t.dims);
  if (expected.is_ok() && expected.value() != n_bytes) {
    return invalid_argument("tensor '" + name + "' is given " + std::to_string(n_bytes) +
                            " bytes, its type and dims need " + std::to_string(expected.value()));
  }
  if (expected.is_ok()) {
    const auto* p = static_cast<const uint8_t*>(data);
    t.bytes.assign(p, p + n_bytes);
  }
  return add(std::move(t));
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> dims, TensorFill fill) {
  if (!fill) return invalid_argument("tensor '" + name + "' has no fill function");
  return add(Tensor{name, type, std::move(dims), 0, {}, std::move(fill)});
}

Status GgufWriter::write(Sink& sink) const {
  uint64_t alignment = 32;
  std::unordered_set<std::string> keys;
  for (const auto& [key, value] : kv_) {
    if (key.empty()) return invalid_argument("empty metadata key");
    VLKV_RETURN_IF_ERROR(check_value(key, value));
    if (key == "general.alignment") {
      const auto* u = std::get_if<uint64_t>(&value.data);
      if (!u || *u == 0 || (*u & (*u - 1)) != 0) {
        return invalid_argument("general.alignment must be an unsigned nonzero power of two");
      }
      alignment = *u;
    }
  }
  // Header: magic, version, counts, metadata, tensor infos.
  VLKV_RETURN_IF_ERROR(sink.put("GGUF", 4));
  VLKV_RETURN_IF_ERROR(sink.put_le<uint32_t>(3));
  VLKV_RETURN_IF_ERROR(sink.put_le<uint64_t>(tensors_.size()));
  VLKV_RETURN_IF_ERROR(sink.put_le<uint64_t>(kv_.size()));
  for (const auto& [key, value] : kv_) {
    VLKV_RETURN_IF_ERROR(sink.put_string(key));
    VLKV_RETURN_IF_ERROR(sink.put_le<uint32_t>(static_cast<uint32_t>(value.type)));
    VLKV_RETURN_IF_ERROR(put_value(sink, value).with_context("key '" + key + "'"));
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    VLKV_RETURN_IF_ERROR(sink.put_string(t.name));
    VLKV_RETURN_IF_ERROR(sink.put_le<uint32_t>(static_cast<uint32_t>(t.dims.size())));
    for (int64_t d : t.dims) VLKV_RETURN_IF_ERROR(sink.put_le<uint64_t>(static_cast<uint64_t>(d)));
    VLKV_RETURN_IF_ERROR(sink.put_le<uint32_t>(static_cast<uint32_t>(t.type)));
    VLKV_RETURN_IF_ERROR(sink.put_le<uint64_t>(offset));
    offset = align_up(offset + t.n_bytes, alignment);
  }
  // Data: each tensor at its aligned offset, padded after (as gguf-py writes).
  VLKV_RETURN_IF_ERROR(sink.pad_to(alignment));
  std::vector<uint8_t> scratch;  // reused by every filled tensor
  for (const Tensor& t : tensors_) {
    if (t.fill) {
      scratch.resize(static_cast<size_t>(t.n_bytes));
      VLKV_RETURN_IF_ERROR(t.fill(scratch.data(), scratch.size()).with_context("tensor '" + t.name + "'"));
      VLKV_RETURN_IF_ERROR(sink.put(scratch.data(), scratch.size()));
    } else {
      VLKV_RETURN_IF_ERROR(sink.put(t.bytes.data(), t.bytes.size()));
    }
    VLKV_RETURN_IF_ERROR(sink.pad_to(alignment));
  }
  return Status::ok();
}

Result<std::vector<uint8_t>> GgufWriter::write_to_buffer() const {
  VectorSink sink;
  VLKV_RETURN_IF_ERROR(write(sink));
  return std::move(sink.bytes);
}

Status GgufWriter::write_to_file(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return io_error(path + ": cannot create: " + std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  FileSink sink(f, path);
  VLKV_RETURN_IF_ERROR(write(sink).with_context(path));
  closer.release();
  if (std::fclose(f) != 0) return io_error(path + ": close failed: " + std::strerror(errno));
  return Status::ok();
}

}  // namespace vlkv
