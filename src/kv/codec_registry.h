// Codecs by name: each codecs/*.cpp registers a factory from a static initializer;
// methods build their codecs from spec strings ("f16", future "int4_token:g=32").
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kv/codec.h"
#include "kv/spec.h"

namespace vlkv {

struct CodecInfo {
  std::string name;
  std::string help;
  std::vector<ParamInfo> params;
  // Called with keys already checked against params.
  std::function<Result<std::shared_ptr<const Codec>>(const Spec&)> create;
};

// Returns true (for use in a static initializer). Aborts on a duplicate name.
bool register_codec(CodecInfo info);
// InvalidArgument for an unknown codec (listing the valid ones) or bad parameters.
Result<std::shared_ptr<const Codec>> make_codec(std::string_view spec);
// Sorted by name.
std::vector<const CodecInfo*> list_codecs();

}  // namespace vlkv

#define VLKV_REGISTER_CODEC(id, ...) \
  static const bool vlkv_codec_registered_##id = ::vlkv::register_codec(__VA_ARGS__)
