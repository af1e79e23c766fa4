// JSON from the parameter tables (EngineParams and SamplerParams::visit): one key per row, its
// JSON name, for GET /props and vlkv bench --json; read back with the rows' ranges checked.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "vlkv/param_field.h"

namespace vlkv {

template <typename Params>
nlohmann::json params_to_json(const Params& params) {
  nlohmann::json j = nlohmann::json::object();
  Params::visit(params, [&](const auto& field, const ParamField& info) { j[info.json] = field; });
  return j;
}

// Sets the fields whose JSON names j holds (others keep their values); a value of the wrong
// type or outside its row's range is InvalidArgument (check_param's message); an unknown key too.
template <typename Params>
Status params_from_json(const nlohmann::json& j, Params& params) {
  if (!j.is_object()) return invalid_argument("parameters must be a JSON object");
  Status st = Status::ok();
  size_t n_known = 0;
  Params::visit(params, [&](auto& field, const ParamField& info) {
    auto it = j.find(info.json);
    if (!st.is_ok() || it == j.end()) return;
    ++n_known;
    using T = std::decay_t<decltype(field)>;
    const bool type_ok = std::is_same_v<T, bool>        ? it->is_boolean()
                         : std::is_integral_v<T>        ? it->is_number_integer()
                         : std::is_floating_point_v<T> ? it->is_number()
                                                        : it->is_string();
    if (!type_ok) {
      st = invalid_argument(std::string(info.json) + " has the wrong JSON type");
      return;
    }
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      st = check_param(info, it->template get<double>());
      if (!st.is_ok()) return;
    }
    field = it->template get<T>();
  });
  if (st.is_ok() && n_known != j.size()) return invalid_argument("parameters hold a key that no table row names");
  return st;
}

}  // namespace vlkv
