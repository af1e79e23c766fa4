// The KV-cache flags shared by run, bench and (later) eval: --kv METHOD[:k=v,...] and
// --kv-budget SIZE; their help lists the registered methods with their parameters, and
// the checks below turn bad values into one error line naming the flag (exit status 2).
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "kv/spec.h"
#include "vlkv/engine.h"
#include "vlkv/status.h"

namespace vlkv::cli {

// The page size the engine's cache uses (EngineParams::kv_page_bytes = 0: KvCacheConfig's
// default), read from that one place so these checks never assume another size.
inline const uint64_t kKvPageBytes = KvCacheConfig{}.page_bytes;

inline std::string kv_page_size_text() {
  return kKvPageBytes % 1024 == 0 ? std::to_string(kKvPageBytes / 1024) + " KiB" : std::to_string(kKvPageBytes) + " B";
}

inline std::string kv_method_help(bool several) {
  return std::string(several ? "Comma-separated KV cache methods" : "KV cache method") +
         ", NAME[:key=value,...], e.g. f16, int4:g=64, kivi2:residual=64" +
         (several ? " (an item key=value continues the previous method: f16,kivi2:residual=64,g=32,int4)" : "") +
         ". `vlkv methods` lists them, `vlkv methods NAME` a method's parameters";
}

// A --kv list where a method's own parameters also use commas: an item with '=' and no
// ':' continues the previous method ("f16,kivi:bits=2,g=32,int4" -> f16 | kivi:bits=2,g=32
// | int4). Method names never contain '=', so a list of plain names splits at every comma.
inline std::vector<std::string> split_kv_method_list(const std::string& list) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(begin, end - begin);
    begin = end + 1;
    if (item.empty()) continue;
    if (!out.empty() && item.find('=') != std::string::npos && item.find(':') == std::string::npos)
      out.back() += "," + item;
    else
      out.push_back(item);
  }
  return out;
}

// Every command's default --kv-budget: half of this machine's physical memory. The pool takes
// pages as sequences grow, so the budget is a ceiling on the cache, not an allocation.
inline constexpr const char* kKvBudgetAuto = "auto";
inline uint64_t auto_kv_budget_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 2ull << 30;  // unknown: the library's default
  return (static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2) >> 20 << 20;
}
inline std::string kv_budget_auto_help() {
  char b[96];
  std::snprintf(b, sizeof b, "auto: half of this machine's memory, %.1f GiB here",
                static_cast<double>(auto_kv_budget_bytes()) / (1ull << 30));
  return b;
}
// The flag as typed, with what "auto" came to: for messages and report headers.
inline std::string kv_budget_text(const std::string& budget) {
  if (budget != kKvBudgetAuto) return budget;
  char b[64];
  std::snprintf(b, sizeof b, "auto (%.1f GiB)", static_cast<double>(auto_kv_budget_bytes()) / (1ull << 30));
  return b;
}

inline void add_kv_flags(CLI::App& app, std::string& method, std::string& budget) {
  app.add_option("--kv", method, kv_method_help(false))->capture_default_str();
  app.add_option("--kv-budget", budget, "KV cache memory budget (e.g. 512M, 4G; " + kv_budget_auto_help() +
                                        "); at least one " + kv_page_size_text() +
                                        " page per K/V stream of every layer and kv head")
      ->capture_default_str();
}

// Before loading the model: what needs no model - syntax, method names, keys, compositions
// (check_method_spec; every SpecErrorKind it returns is the flag's). Values and head_dim are
// checked when the model loads: see check_kv_load_error.
inline Status check_kv_method_flag(const std::string& method, const char* flag = "--kv") {
  if (std::optional<SpecError> e = check_method_spec(method))
    return invalid_argument(std::string(flag) + " '" + method + "': " + e->message);
  return Status::ok();
}

inline Result<uint64_t> parse_kv_budget_flag(const std::string& budget) {
  if (budget == kKvBudgetAuto) return auto_kv_budget_bytes();
  Result<uint64_t> b = parse_byte_size(budget);
  if (!b.is_ok()) return invalid_argument("--kv-budget '" + budget + "': " + b.status().message());
  if (*b < kKvPageBytes)
    return invalid_argument("--kv-budget '" + budget + "' is smaller than one KV page (" + kv_page_size_text() + "); use e.g. 512M");
  return *b;
}

// After the model is known: the budget must hold the first token (one page per K/V
// stream of every layer and kv head), and the context must fit the model.
inline Status check_kv_budget_for_model(uint64_t budget, const std::string& budget_text, const ModelInfo& info) {
  const uint64_t pages = 2ull * static_cast<uint64_t>(info.n_layers) * static_cast<uint64_t>(info.n_kv_heads);
  if (budget < pages * kKvPageBytes)
    return invalid_argument("--kv-budget '" + kv_budget_text(budget_text) + "' holds " + std::to_string(budget / kKvPageBytes) +
                            " pages of " + kv_page_size_text() + "; this model needs at least " + std::to_string(pages) + " (" +
                            std::to_string((pages * kKvPageBytes + 1023) >> 10) + " KiB) for its first token");
  return Status::ok();
}

// Engine::load failed: KV method refusals (ErrorKind::kKvMethod, e.g. a group size that does
// not divide the model's head_dim) get the flag's name in front.
inline Status check_kv_load_error(const Status& st, const std::string& method, const char* flag = "--kv") {
  if (st.code() == StatusCode::kInvalidArgument && st.kind() == ErrorKind::kKvMethod)
    return Status(st.code(), std::string(flag) + " '" + method + "': " + st.message());
  return st;
}

}  // namespace vlkv::cli
