#include "kv/method_registry.h"

#include <map>
#include <variant>

#include "kv/registry_table.h"

namespace vlkv {

bool register_method(MethodInfo info) { return add_to_registry(std::move(info), "KV method registered twice"); }

namespace {

// The outer part of text (before the first '+') parsed and looked up, or its SpecError.
struct Looked {
  Spec spec;
  const MethodInfo* info = nullptr;
};
std::variant<Looked, SpecError> look_up(std::string_view text) {
  const size_t plus = text.find('+');
  Result<Spec> spec = Spec::parse(text.substr(0, plus));
  if (!spec.is_ok()) return SpecError{SpecErrorKind::kSyntax, spec.status().message()};
  const auto& table = registry_table<MethodInfo>();
  const auto it = table.find(spec->name());
  if (it == table.end()) {
    return SpecError{SpecErrorKind::kUnknownName,
                     "unknown KV method '" + spec->name() + "'; valid methods: " + registry_names<MethodInfo>()};
  }
  if (Status st = spec->check_keys(it->second.params); !st.is_ok()) return SpecError{SpecErrorKind::kUnknownKey, st.message()};
  if (plus != std::string_view::npos && !it->second.wrap) {
    std::string wrappers;
    for (const auto& [name, info] : table)
      if (info.wrap) wrappers += (wrappers.empty() ? "" : ", ") + name;
    return SpecError{SpecErrorKind::kComposition, "'" + spec->name() + "' does not wrap another method (in '" +
                                                      std::string(text) + "'; methods that do: " + wrappers + ")"};
  }
  return Looked{std::move(spec).value(), &it->second};
}

}  // namespace

Result<std::unique_ptr<Method>> create_method(std::string_view text, const KvGeometry& geometry) {
  std::variant<Looked, SpecError> looked = look_up(text);
  if (const SpecError* e = std::get_if<SpecError>(&looked)) return e->status();
  const Looked& m = std::get<Looked>(looked);
  const size_t plus = text.find('+');
  if (plus == std::string_view::npos) return m.info->create(m.spec, geometry);
  VLKV_ASSIGN_OR_RETURN(std::unique_ptr<Method> inner, create_method(text.substr(plus + 1), geometry));
  return m.info->wrap(m.spec, geometry, std::move(inner));
}

std::optional<SpecError> check_method_spec(std::string_view text) {
  for (size_t begin = 0; begin <= text.size();) {
    std::variant<Looked, SpecError> looked = look_up(text.substr(begin));
    if (SpecError* e = std::get_if<SpecError>(&looked)) return std::move(*e);
    const size_t plus = text.find('+', begin);
    if (plus == std::string_view::npos) break;
    begin = plus + 1;
  }
  return std::nullopt;
}


std::vector<const MethodInfo*> list_methods() { return registry_entries<MethodInfo>(); }

std::string describe_methods() {
  std::string out;
  for (const MethodInfo* m : list_methods()) {
    out += "  " + m->name + ": " + m->help + "\n";
    for (const auto& p : m->params) out += "      " + p.name + "=" + p.default_value + "  " + p.help + "\n";
  }
  return out;
}

}  // namespace vlkv
