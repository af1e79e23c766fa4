// Typed metadata getters of GgufFile: integer widths convert when the value fits.
#include <limits>
#include <string>

#include "gguf/gguf_reader.h"

namespace vlkv {

const char* gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "u8";
    case GgufValueType::kInt8: return "i8";
    case GgufValueType::kUint16: return "u16";
    case GgufValueType::kInt16: return "i16";
    case GgufValueType::kUint32: return "u32";
    case GgufValueType::kInt32: return "i32";
    case GgufValueType::kFloat32: return "f32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "u64";
    case GgufValueType::kInt64: return "i64";
    case GgufValueType::kFloat64: return "f64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}

bool GgufValue::is_float() const { return std::holds_alternative<double>(data); }

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // validated against overflow by the reader
  return n;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

std::string type_desc(const GgufValue& v) {
  std::string s = gguf_value_type_name(v.type);
  if (const auto* a = std::get_if<GgufValue::Array>(&v.data)) {
    s += " of ";
    s += gguf_value_type_name(a->element_type);
  }
  return s;
}

Status wrong_type(const std::string& path, std::string_view key, const GgufValue& v, const char* expected) {
  return invalid_file(path + ": key '" + std::string(key) + "' has type " + type_desc(v) + ", expected " + expected);
}

Status out_of_range(const std::string& path, std::string_view key, const char* expected) {
  return invalid_file(path + ": key '" + std::string(key) + "' holds a value that does not fit in " + expected);
}

bool integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kUint16:
    case GgufValueType::kInt16: case GgufValueType::kUint32: case GgufValueType::kInt32:
    case GgufValueType::kUint64: case GgufValueType::kInt64: return true;
    default: return false;
  }
}

bool float_type(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }

// Integer conversions shared by scalars and array items; false if out of range or not an integer.
bool to_u64(const GgufValue& v, uint64_t* out) {
  if (const auto* u = std::get_if<uint64_t>(&v.data)) { *out = *u; return true; }
  if (const auto* s = std::get_if<int64_t>(&v.data); s && *s >= 0) { *out = static_cast<uint64_t>(*s); return true; }
  return false;
}

bool to_i64(const GgufValue& v, int64_t* out) {
  if (const auto* s = std::get_if<int64_t>(&v.data)) { *out = *s; return true; }
  if (const auto* u = std::get_if<uint64_t>(&v.data);
      u && *u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *out = static_cast<int64_t>(*u);
    return true;
  }
  return false;
}

// An integer key's value as T (to_u64 or to_i64), or why not.
template <class T>
Result<T> integer_as(const std::string& path, std::string_view key, const GgufValue& v,
                     bool (*convert)(const GgufValue&, T*), const char* type_name) {
  if (!v.is_integer()) return wrong_type(path, key, v, "an integer");
  T out = 0;
  if (!convert(v, &out)) return out_of_range(path, key, type_name);
  return out;
}

bool to_f64(const GgufValue& v, double* out) {
  if (const auto* d = std::get_if<double>(&v.data)) { *out = *d; return true; }
  if (const auto* u = std::get_if<uint64_t>(&v.data)) { *out = static_cast<double>(*u); return true; }
  if (const auto* s = std::get_if<int64_t>(&v.data)) { *out = static_cast<double>(*s); return true; }
  return false;
}

}  // namespace

#define VLKV_FIND_OR_RETURN(var, key)                                                  \
  const GgufValue* var = find(key);                                                    \
  if (!var) return not_found(path_ + ": metadata key '" + std::string(key) + "' is missing")

Result<uint64_t> GgufFile::get_u64(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  return integer_as<uint64_t>(path_, key, *v, to_u64, "u64");
}

Result<int64_t> GgufFile::get_i64(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  return integer_as<int64_t>(path_, key, *v, to_i64, "i64");
}

Result<double> GgufFile::get_f64(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  double out = 0;
  if (!to_f64(*v, &out)) return wrong_type(path_, key, *v, "a number");
  return out;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  const bool* b = std::get_if<bool>(&v->data);
  if (!b) return wrong_type(path_, key, *v, "bool");
  return *b;
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  const std::string* s = std::get_if<std::string>(&v->data);
  if (!s) return wrong_type(path_, key, *v, "string");
  return *s;
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  const auto* a = std::get_if<GgufValue::Array>(&v->data);
  if (!a || a->element_type != GgufValueType::kString) return wrong_type(path_, key, *v, "array of string");
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const GgufValue& item : a->items) out.push_back(std::get<std::string>(item.data));
  return out;
}

Result<std::vector<double>> GgufFile::get_f64_array(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  const auto* a = std::get_if<GgufValue::Array>(&v->data);
  if (!a || !(integer_type(a->element_type) || float_type(a->element_type))) {
    return wrong_type(path_, key, *v, "array of numbers");
  }
  std::vector<double> out(a->items.size());
  for (size_t i = 0; i < out.size(); ++i) to_f64(a->items[i], &out[i]);
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_i64_array(std::string_view key) const {
  VLKV_FIND_OR_RETURN(v, key);
  const auto* a = std::get_if<GgufValue::Array>(&v->data);
  if (!a || !integer_type(a->element_type)) return wrong_type(path_, key, *v, "array of integers");
  std::vector<int64_t> out(a->items.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!to_i64(a->items[i], &out[i])) return out_of_range(path_, key, "i64");
  }
  return out;
}

#undef VLKV_FIND_OR_RETURN

}  // namespace vlkv
