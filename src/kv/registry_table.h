// The name -> Info table behind the codec and method registries (CodecInfo, MethodInfo): filled
// from other files' static initializers, so it lives in a function-local static.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/check.h"

namespace vlkv {

template <class Info>
std::map<std::string, Info>& registry_table() {
  static std::map<std::string, Info> table;
  return table;
}

// Adds info under info.name; a name registered twice is a programming error (twice_msg).
template <class Info>
bool add_to_registry(Info info, const char* twice_msg) {
  auto& table = registry_table<Info>();
  VLKV_CHECK_MSG(table.find(info.name) == table.end(), twice_msg);
  std::string name = info.name;
  table.emplace(std::move(name), std::move(info));
  return true;
}

// "a, b, c": the registered names, for an unknown-name error.
template <class Info>
std::string registry_names() {
  std::string names;
  for (const auto& [name, info] : registry_table<Info>()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

template <class Info>
std::vector<const Info*> registry_entries() {
  std::vector<const Info*> out;
  for (const auto& [name, info] : registry_table<Info>()) out.push_back(&info);
  return out;
}

}  // namespace vlkv
