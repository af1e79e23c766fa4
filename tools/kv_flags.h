// The KV-cache flags shared by run, bench and (later) eval: --kv METHOD[:k=v,...] and --kv-budget SIZE.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace vlkv::cli {

inline void add_kv_flags(CLI::App& app, std::string& method, std::string& budget) {
  app.add_option("--kv", method,
                 "KV cache method and parameters: NAME[:key=value,...], e.g. f16, f32")
      ->capture_default_str();
  app.add_option("--kv-budget", budget, "KV cache memory budget (e.g. 512M, 4G)")->capture_default_str();
}

}  // namespace vlkv::cli
