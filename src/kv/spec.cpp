#include "kv/spec.h"

#include <cerrno>
#include <cstdlib>

namespace vlkv {

// Values may also be file paths ('/'), e.g. map=out/map.json.
static bool valid_ident(std::string_view s, bool value = false) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == '+' || (value && c == '/');
    if (!ok) return false;
  }
  return true;
}

Result<Spec> Spec::parse(std::string_view text) {
  Spec spec;
  const size_t colon = text.find(':');
  spec.name_ = std::string(text.substr(0, colon));
  if (!valid_ident(spec.name_)) return invalid_argument("bad spec '" + std::string(text) + "': empty or malformed name");
  if (colon == std::string_view::npos) return spec;
  std::string_view rest = text.substr(colon + 1);
  if (rest.empty()) return invalid_argument("bad spec '" + std::string(text) + "': nothing after ':'");
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      return invalid_argument("bad spec '" + std::string(text) + "': expected key=value, got '" + std::string(item) + "'");
    std::string key(item.substr(0, eq)), value(item.substr(eq + 1));
    if (!valid_ident(key) || !valid_ident(value, /*value=*/true))
      return invalid_argument("bad spec '" + std::string(text) + "': malformed '" + std::string(item) + "'");
    if (spec.has(key)) return invalid_argument("bad spec '" + std::string(text) + "': repeated key '" + key + "'");
    spec.params_.emplace_back(std::move(key), std::move(value));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return invalid_argument("bad spec '" + std::string(text) + "': trailing ','");
  }
  return spec;
}

const std::string* Spec::find(std::string_view key) const {
  for (const auto& [k, v] : params_)
    if (k == key) return &v;
  return nullptr;
}

bool Spec::has(std::string_view key) const { return find(key) != nullptr; }

std::string join_param_names(const std::vector<ParamInfo>& params) {
  std::string out;
  for (const auto& p : params) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out.empty() ? "(none)" : out;
}

Status Spec::check_keys(const std::vector<ParamInfo>& accepted) const {
  for (const auto& [k, v] : params_) {
    bool known = false;
    for (const auto& p : accepted) known = known || p.name == k;
    if (!known)
      return invalid_argument("'" + name_ + "' has no parameter '" + k + "'; valid parameters: " +
                              join_param_names(accepted));
  }
  return Status::ok();
}

Result<int64_t> Spec::get_int(std::string_view key, int64_t def, int64_t lo, int64_t hi) const {
  const std::string* v = find(key);
  if (!v) return def;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  if (errno != 0 || end != v->c_str() + v->size() || x < lo || x > hi)
    return invalid_argument("'" + name_ + "': " + std::string(key) + "=" + *v + " is not an integer in [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int64_t>(x);
}

Result<double> Spec::get_double(std::string_view key, double def, double lo, double hi) const {
  const std::string* v = find(key);
  if (!v) return def;
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (errno != 0 || end != v->c_str() + v->size() || !(x >= lo && x <= hi))
    return invalid_argument("'" + name_ + "': " + std::string(key) + "=" + *v + " is not a number in [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::string Spec::get_string(std::string_view key, std::string_view def) const {
  const std::string* v = find(key);
  return v ? *v : std::string(def);
}

std::string Spec::to_string() const {
  std::string out = name_;
  for (size_t i = 0; i < params_.size(); ++i) out += (i == 0 ? ":" : ",") + params_[i].first + "=" + params_[i].second;
  return out;
}

}  // namespace vlkv
