// KV methods by name: each methods/*.cpp registers itself from a static initializer
// (VLKV_REGISTER_KV_METHOD). The CLI help, the conformance test and the benchmarks
// iterate list_methods(); KvCache::create builds the configured one from its spec.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_types.h"
#include "kv/method.h"
#include "kv/spec.h"

namespace vlkv {

struct MethodInfo {
  std::string name;
  std::string help;
  std::vector<ParamInfo> params;  // accepted keys, defaults and help
  // Called with keys already checked against params; validates values and geometry.
  std::function<Result<std::unique_ptr<Method>>(const Spec&, const KvGeometry&)> create;
  // Set for methods that wrap a storage method ("outer+inner"):
  // called with the inner method already created.
  std::function<Result<std::unique_ptr<Method>>(const Spec&, const KvGeometry&, std::unique_ptr<Method>)> wrap = nullptr;
};

// Returns true (for use in a static initializer). Aborts on a duplicate name.
bool register_method(MethodInfo info);
// "name[:key=value,...]" or a composition "outer[:...]+inner[:...]" (split at the first
// '+'; the outer method must wrap). InvalidArgument for an unknown method (listing the
// valid ones), an unknown key (listing the valid keys) or a bad value.
Result<std::unique_ptr<Method>> create_method(std::string_view spec, const KvGeometry& geometry);
// The checks that need no model: syntax, method names (each part of a composition), keys
// and whether an outer method wraps. Values and head_dim are checked by create_method.
std::optional<SpecError> check_method_spec(std::string_view spec);
// Sorted by name.
std::vector<const MethodInfo*> list_methods();
// One line per method with its parameters, for --help.
std::string describe_methods();

}  // namespace vlkv

#define VLKV_REGISTER_KV_METHOD(id, ...) \
  static const bool vlkv_method_registered_##id = ::vlkv::register_method(__VA_ARGS__)
