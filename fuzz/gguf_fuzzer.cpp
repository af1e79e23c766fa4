// libFuzzer target: GgufFile::parse on arbitrary bytes, then touches every metadata
// value (through every getter) and the first and last byte of every tensor, so an
// unchecked offset or size shows up as an ASan report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gguf/ggml_type_info.h"
#include "gguf/gguf_reader.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads from being optimized away

uint64_t walk(const vlkv::GgufValue& v) {
  uint64_t h = static_cast<uint64_t>(v.type);
  if (const auto* a = std::get_if<vlkv::GgufValue::Array>(&v.data)) {
    for (const vlkv::GgufValue& item : a->items) {
      if (item.type != a->element_type) std::abort();  // the reader must keep arrays homogeneous
      h += walk(item);
    }
  } else if (const auto* s = std::get_if<std::string>(&v.data)) {
    h += s->size() + (s->empty() ? 0 : static_cast<uint8_t>(s->back()));
  } else if (const auto* u = std::get_if<uint64_t>(&v.data)) {
    h += *u;
  } else if (const auto* i = std::get_if<int64_t>(&v.data)) {
    h += static_cast<uint64_t>(*i);
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = vlkv::GgufFile::parse(data, size, "fuzz.gguf");
  if (!f.is_ok()) return 0;
  const vlkv::GgufFile& g = **f;
  uint64_t h = g.alignment() + g.data_offset();
  for (const auto& [key, value] : g.metadata()) {
    if (g.find(key) != &value) std::abort();
    h += walk(value);
    if (auto r = g.get_u64(key); r.is_ok()) h += r.value();
    if (auto r = g.get_i64(key); r.is_ok()) h += static_cast<uint64_t>(r.value());
    if (auto r = g.get_f64(key); r.is_ok()) h += r.value() > 0;
    if (auto r = g.get_bool(key); r.is_ok()) h += r.value();
    if (auto r = g.get_string(key); r.is_ok()) h += r.value().size();
    if (auto r = g.get_string_array(key); r.is_ok()) h += r.value().size();
    if (auto r = g.get_f64_array(key); r.is_ok()) h += r.value().size();
    if (auto r = g.get_i64_array(key); r.is_ok()) h += r.value().size();
  }
  for (const vlkv::GgufTensorInfo& t : g.tensors()) {
    if (g.find_tensor(t.name) != &t) std::abort();
    const vlkv::GgmlTypeInfo* info = vlkv::ggml_type_info(t.type);
    if (!info || t.n_elements() <= 0 || t.n_bytes == 0) std::abort();
    if (t.data < data || t.n_bytes > size || t.data + t.n_bytes > data + size) std::abort();
    h += t.data[0] + t.data[t.n_bytes - 1];
  }
  g_sink = h;
  return 0;
}
