#include "kv/methods/qcache/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace vlkv::calibration {

namespace {
constexpr const char* kFormat = "vlkv-qcache-map";
constexpr int kVersion = 1;

std::string hex64(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

Grouping from_flags(const std::vector<uint8_t>& lazy) {
  Grouping g;
  g.base.assign(lazy.size(), -1);
  int base = 0;
  for (size_t l = 0; l < lazy.size(); ++l) {
    if (l > 0 && lazy[l]) g.base[l] = base;
    else base = static_cast<int>(l);
  }
  return g;
}
}  // namespace

double jensen_shannon(const float* p, const float* q, int64_t n) {
  double sp = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sp += p[i];
    sq += q[i];
  }
  double js = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = p[i] / sp, b = q[i] / sq, m = 0.5 * (a + b);
    if (a > 0) js += 0.5 * a * std::log(a / m);
    if (b > 0) js += 0.5 * b * std::log(b / m);
  }
  return std::max(0.0, js);  // rounding can leave -1e-17
}

MapJsd compare_maps(const float* p, const float* q, int64_t n, const TokenKind* kinds) {
  MapJsd out;
  out.whole = jensen_shannon(p, q, n);
  if (!kinds) return out;
  std::vector<float> a, b;
  double sa = 0, sb = 0;
  for (int64_t j = 0; j < n; ++j)
    if (kinds[j] == TokenKind::kVisual) {
      a.push_back(p[j]);
      b.push_back(q[j]);
      sa += p[j];
      sb += q[j];
    }
  if (!a.empty() && sa > 0 && sb > 0) out.visual = jensen_shannon(a.data(), b.data(), static_cast<int64_t>(a.size()));
  return out;
}

int Grouping::n_lazy() const {
  return static_cast<int>(std::count_if(base.begin(), base.end(), [](int b) { return b >= 0; }));
}

std::vector<int> Grouping::lazy_layers() const {
  std::vector<int> out;
  for (size_t l = 0; l < base.size(); ++l)
    if (base[l] >= 0) out.push_back(static_cast<int>(l));
  return out;
}

std::vector<std::vector<int>> Grouping::blocks() const {
  std::vector<std::vector<int>> out;
  for (size_t l = 0; l < base.size(); ++l) {
    if (base[l] < 0) out.push_back({});
    out.back().push_back(static_cast<int>(l));
  }
  return out;
}

Result<Grouping> grouping_from_lazy(int n_layers, const std::vector<int>& lazy) {
  std::vector<uint8_t> flags(static_cast<size_t>(std::max(0, n_layers)), 0);
  for (size_t i = 0; i < lazy.size(); ++i) {
    if (lazy[i] < 1 || lazy[i] >= n_layers)
      return invalid_argument("lazy layer " + std::to_string(lazy[i]) + " is outside [1, " + std::to_string(n_layers) +
                              ") (layer 0 is always standard)");
    if (i > 0 && lazy[i] <= lazy[i - 1]) return invalid_argument("lazy layers must be ascending and distinct");
    flags[static_cast<size_t>(lazy[i])] = 1;
  }
  return from_flags(flags);
}

Grouping group_by_threshold(const std::vector<double>& jsd_adjacent, double threshold) {
  std::vector<uint8_t> flags(jsd_adjacent.size() + 1, 0);
  for (size_t l = 1; l < flags.size(); ++l) flags[l] = jsd_adjacent[l - 1] < threshold;
  return from_flags(flags);
}

Grouping group_by_count(const std::vector<double>& jsd_adjacent, int k) {
  std::vector<int> order(jsd_adjacent.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return jsd_adjacent[a] < jsd_adjacent[b]; });
  std::vector<uint8_t> flags(jsd_adjacent.size() + 1, 0);
  k = std::clamp(k, 0, static_cast<int>(order.size()));
  for (int i = 0; i < k; ++i) flags[static_cast<size_t>(order[i]) + 1] = 1;
  return from_flags(flags);
}

Grouping pattern_grouping(int n_layers) {
  std::vector<uint8_t> flags(static_cast<size_t>(n_layers), 0);
  for (int l = 3; l <= n_layers - 2; l += 2) flags[l] = 1;
  return from_flags(flags);
}

Grouping random_grouping(int n_layers, int k, uint64_t seed) {
  std::vector<int> candidates;
  for (int l = 1; l < n_layers; ++l) candidates.push_back(l);
  std::mt19937_64 rng(seed);
  std::shuffle(candidates.begin(), candidates.end(), rng);
  std::vector<uint8_t> flags(static_cast<size_t>(n_layers), 0);
  k = std::clamp(k, 0, static_cast<int>(candidates.size()));
  for (int i = 0; i < k; ++i) flags[static_cast<size_t>(candidates[i])] = 1;
  return from_flags(flags);
}

const std::vector<double>& CalibrationMap::criterion_jsd() const {
  return criterion == "visual" && !jsd_adjacent_visual.empty() ? jsd_adjacent_visual : jsd_adjacent;
}

std::string map_to_json(const CalibrationMap& map) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["model"] = {{"arch", map.model.arch},       {"n_layers", map.model.n_layers},
                {"n_heads", map.model.n_heads}, {"n_kv_heads", map.model.n_kv_heads},
                {"head_dim", map.model.head_dim}, {"fingerprint", hex64(map.model.fingerprint)}};
  j["criterion"] = map.criterion;
  j["jsd_adjacent"] = map.jsd_adjacent;
  j["jsd_adjacent_visual"] = map.jsd_adjacent_visual;
  if (map.threshold >= 0) j["threshold"] = map.threshold;
  else j["threshold"] = nullptr;
  j["lazy_layers"] = map.grouping.lazy_layers();
  j["blocks"] = map.grouping.blocks();
  j["n_prompts"] = map.n_prompts;
  j["n_queries"] = map.n_queries;
  return j.dump(1) + "\n";
}

Status save_map(const std::string& path, const CalibrationMap& map) {
  std::ofstream f(path);
  if (!f) return invalid_argument("cannot write the calibration map " + path);
  f << map_to_json(map);
  f.close();
  if (!f) return invalid_argument("writing the calibration map " + path + " failed");
  return Status::ok();
}

Result<CalibrationMap> load_map(const std::string& path, const KvGeometry& geometry) {
  std::ifstream f(path);
  if (!f) return invalid_argument("Q Cache map " + path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) { return invalid_argument("Q Cache map " + path + ": " + why); };
  if (j.is_discarded() || !j.is_object()) return bad("not JSON (expected a map written by vlkv calibrate)");
  if (!j.contains("format") || j["format"] != kFormat)
    return bad("not a vlkv Q Cache map (no \"format\": \"" + std::string(kFormat) + "\"; write one with vlkv calibrate)");
  if (!j.contains("version") || j["version"] != kVersion) return bad("unsupported version (expected 1)");
  CalibrationMap m;
  try {
    const auto& mo = j.at("model");
    m.model.arch = mo.at("arch").get<std::string>();
    m.model.n_layers = mo.at("n_layers").get<int>();
    m.model.n_heads = mo.at("n_heads").get<int>();
    m.model.n_kv_heads = mo.at("n_kv_heads").get<int>();
    m.model.head_dim = mo.at("head_dim").get<int>();
    m.model.fingerprint = std::stoull(mo.at("fingerprint").get<std::string>(), nullptr, 16);
    m.criterion = j.at("criterion").get<std::string>();
    m.jsd_adjacent = j.at("jsd_adjacent").get<std::vector<double>>();
    m.jsd_adjacent_visual = j.at("jsd_adjacent_visual").get<std::vector<double>>();
    m.threshold = j.at("threshold").is_null() ? -1.0 : j.at("threshold").get<double>();
    m.n_prompts = j.at("n_prompts").get<int64_t>();
    m.n_queries = j.at("n_queries").get<int64_t>();
    const std::vector<int> lazy = j.at("lazy_layers").get<std::vector<int>>();
    Result<Grouping> g = grouping_from_lazy(m.model.n_layers, lazy);
    if (!g.is_ok()) return bad(g.status().message());
    m.grouping = *g;
  } catch (const std::exception& e) {
    return bad(std::string("malformed (") + e.what() + ")");
  }
  if (m.criterion != "visual" && m.criterion != "whole") return bad("criterion must be \"visual\" or \"whole\"");
  const size_t n_adj = static_cast<size_t>(std::max(0, m.model.n_layers - 1));
  if (m.jsd_adjacent.size() != n_adj || (!m.jsd_adjacent_visual.empty() && m.jsd_adjacent_visual.size() != n_adj))
    return bad("JSD tables must have n_layers - 1 entries");
  const ModelIdentity& mo = m.model;
  if (mo.n_layers != geometry.n_layers || mo.n_heads != geometry.n_heads || mo.n_kv_heads != geometry.n_kv_heads ||
      mo.head_dim != geometry.head_dim)
    return bad("measured on another model (" + mo.arch + ": " + std::to_string(mo.n_layers) + " layers, " +
               std::to_string(mo.n_heads) + "/" + std::to_string(mo.n_kv_heads) + " heads, head_dim " +
               std::to_string(mo.head_dim) + "; this model: " + std::to_string(geometry.n_layers) + " layers, " +
               std::to_string(geometry.n_heads) + "/" + std::to_string(geometry.n_kv_heads) + " heads, head_dim " +
               std::to_string(geometry.head_dim) + ")");
  if (mo.fingerprint != 0 && geometry.model_fingerprint != 0 && mo.fingerprint != geometry.model_fingerprint)
    return bad("measured on another model (tensor table fingerprint " + hex64(mo.fingerprint) + ", this model's " +
               hex64(geometry.model_fingerprint) + ")");
  return m;
}

}  // namespace vlkv::calibration
