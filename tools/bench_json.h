// One JSON line of `vlkv bench` (text or media rows): the row's own columns plus what every
// row carries, the SIMD tier, the thread count and the engine it ran with (one key per row of
// EngineParams' table, its KV method the row's).
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "base/cpu_features.h"
#include "param_json.h"
#include "vlkv/engine.h"

namespace vlkv::cli {

inline void print_bench_json(nlohmann::json row, const EngineParams& engine, const std::string& kv_method,
                             int threads) {
  row["simd"] = simd_tier_name(simd_tier());
  row["threads"] = threads;
  EngineParams used = engine;
  used.kv_method = kv_method;
  row["engine"] = params_to_json(used);
  std::printf("%s\n", row.dump().c_str());
}

}  // namespace vlkv::cli
