// Help pages that fit a screen: CLI11's formatter, but an option's type is printed without
// its validator's text ("--port INT=8080", not "--port INT:INT in [0 - 65535]=8080" on a line
// of its own). The range is still checked, and a value outside it is refused naming the range.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace vlkv::cli {

class CompactHelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string text = CLI::Formatter::make_option_opts(opt);
    const std::string type = opt->get_type_name();
    const size_t colon = type.find(':');
    if (colon == std::string::npos || type.empty()) return text;
    if (const size_t at = text.find(type); at != std::string::npos) text.replace(at, type.size(), type.substr(0, colon));
    return text;
  }
};

inline void use_compact_help(CLI::App& app) { app.formatter(std::make_shared<CompactHelpFormatter>()); }

}  // namespace vlkv::cli
