#include "kv/codec_registry.h"

#include <algorithm>
#include <map>

#include "kv/registry_table.h"

namespace vlkv {

bool register_codec(CodecInfo info) { return add_to_registry(std::move(info), "codec registered twice"); }

Result<std::shared_ptr<const Codec>> make_codec(std::string_view text) {
  VLKV_ASSIGN_OR_RETURN(Spec spec, Spec::parse(text));
  const auto& table = registry_table<CodecInfo>();
  const auto it = table.find(spec.name());
  if (it == table.end()) {
    return invalid_argument("unknown KV codec '" + spec.name() + "'; valid codecs: " + registry_names<CodecInfo>());
  }
  VLKV_RETURN_IF_ERROR(spec.check_keys(it->second.params));
  return it->second.create(spec);
}

std::vector<const CodecInfo*> list_codecs() { return registry_entries<CodecInfo>(); }

}  // namespace vlkv
