#include "kv/codec_registry.h"

#include <algorithm>
#include <map>

#include "base/check.h"

namespace vlkv {

// Function-local static: registration runs from other files' static initializers.
static std::map<std::string, CodecInfo>& codec_table() {
  static std::map<std::string, CodecInfo> table;
  return table;
}

bool register_codec(CodecInfo info) {
  auto& table = codec_table();
  VLKV_CHECK_MSG(table.find(info.name) == table.end(), "codec registered twice");
  std::string name = info.name;
  table.emplace(std::move(name), std::move(info));
  return true;
}

Result<std::shared_ptr<const Codec>> make_codec(std::string_view text) {
  VLKV_ASSIGN_OR_RETURN(Spec spec, Spec::parse(text));
  const auto& table = codec_table();
  const auto it = table.find(spec.name());
  if (it == table.end()) {
    std::string valid;
    for (const auto& [name, info] : table) valid += (valid.empty() ? "" : ", ") + name;
    return invalid_argument("unknown KV codec '" + spec.name() + "'; valid codecs: " + valid);
  }
  VLKV_RETURN_IF_ERROR(spec.check_keys(it->second.params));
  return it->second.create(spec);
}

std::vector<const CodecInfo*> list_codecs() {
  std::vector<const CodecInfo*> out;
  for (const auto& [name, info] : codec_table()) out.push_back(&info);
  return out;
}

}  // namespace vlkv
