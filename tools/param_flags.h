// Command-line flags from the parameter tables (EngineParams and SamplerParams::visit): each
// row's flag and help, its default shown, its range checked while parsing with check_param's
// message, the one the server and Engine::load give for the same bad value.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "vlkv/param_field.h"

namespace vlkv::cli {

// CLI11 check of a number flag against its row; text that is no number is left to CLI11's
// own conversion error.
inline CLI::Validator param_validator(const ParamField& info) {
  return CLI::Validator(
      [info](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str()) return {};
        const Status st = check_param(info, v);
        return st.is_ok() ? std::string() : st.message();
      },
      param_range_text(info));
}

// Adds a flag for every row of Params' table that has one and whose JSON name is in `only`
// (every row when `only` is empty): bools as switches, numbers checked against their range.
template <typename Params>
void add_param_flags(CLI::App& app, Params& params, std::initializer_list<std::string_view> only = {}) {
  Params::visit(params, [&](auto& field, const ParamField& info) {
    if (!*info.flags) return;
    bool wanted = only.size() == 0;
    for (std::string_view name : only) wanted = wanted || name == info.json;
    if (!wanted) return;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, bool>) {
      app.add_flag(info.flags, field, info.help);
    } else if constexpr (std::is_arithmetic_v<T>) {
      CLI::Option* opt = app.add_option(info.flags, field, info.help)->capture_default_str();
      // An integer row without bounds takes its type's range (CLI11's conversion checks it).
      if (std::is_floating_point_v<T> || std::isfinite(info.min) || std::isfinite(info.max))
        opt->check(param_validator(info));
    } else {
      app.add_option(info.flags, field, info.help);
    }
  });
}

}  // namespace vlkv::cli
