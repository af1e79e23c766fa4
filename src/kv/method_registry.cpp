#include "kv/method_registry.h"

#include <map>

#include "base/check.h"

namespace vlkv {

static std::map<std::string, MethodInfo>& method_table() {
  static std::map<std::string, MethodInfo> table;  // function-local: safe from static initializers
  return table;
}

bool register_method(MethodInfo info) {
  auto& table = method_table();
  VLKV_CHECK_MSG(table.find(info.name) == table.end(), "KV method registered twice");
  std::string name = info.name;
  table.emplace(std::move(name), std::move(info));
  return true;
}

Result<std::unique_ptr<Method>> create_method(std::string_view text, const KvGeometry& geometry) {
  const size_t plus = text.find('+');
  VLKV_ASSIGN_OR_RETURN(Spec spec, Spec::parse(text.substr(0, plus)));
  const auto& table = method_table();
  const auto it = table.find(spec.name());
  if (it == table.end()) {
    std::string valid;
    for (const auto& [name, info] : table) valid += (valid.empty() ? "" : ", ") + name;
    return invalid_argument("unknown KV method '" + spec.name() + "'; valid methods: " + valid);
  }
  VLKV_RETURN_IF_ERROR(spec.check_keys(it->second.params));
  if (plus == std::string_view::npos) return it->second.create(spec, geometry);
  if (!it->second.wrap) {
    std::string wrappers;
    for (const auto& [name, info] : table)
      if (info.wrap) wrappers += (wrappers.empty() ? "" : ", ") + name;
    return invalid_argument("'" + spec.name() + "' does not wrap another method (in '" + std::string(text) +
                            "'; methods that do: " + wrappers + ")");
  }
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Method> inner, create_method(text.substr(plus + 1), geometry));
  return it->second.wrap(spec, geometry, std::move(inner));
}

std::vector<const MethodInfo*> list_methods() {
  std::vector<const MethodInfo*> out;
  for (const auto& [name, info] : method_table()) out.push_back(&info);
  return out;
}

std::string describe_methods() {
  std::string out;
  for (const MethodInfo* m : list_methods()) {
    out += "  " + m->name + ": " + m->help + "\n";
    for (const auto& p : m->params) out += "      " + p.name + "=" + p.default_value + "  " + p.help + "\n";
  }
  return out;
}

}  // namespace vlkv
