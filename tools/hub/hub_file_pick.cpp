#include "hub/hub_file_pick.h"

#include <cctype>
#include <cstdlib>
#include <regex>

namespace vlkv::hub {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_model_gguf(const std::string& path) {
  if (!ends_with(path, ".gguf")) return false;
  const std::string name = base_name(path);
  for (const char* side : {"mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"}) {
    if (name.find(side) != std::string::npos) return false;
  }
  return true;
}

struct SplitInfo {
  std::string prefix;  // path without ".gguf" and without "-0000i-of-0000n"
  int index = 1;
  int count = 1;
};

SplitInfo split_info(const std::string& path) {
  SplitInfo info;
  info.prefix = ends_with(path, ".gguf") ? path.substr(0, path.size() - 5) : path;
  static const std::regex kSplit("^(.+)-([0-9]{5})-of-([0-9]{5})$", std::regex::icase);
  std::smatch m;
  if (std::regex_match(info.prefix, m, kSplit)) {
    info.index = std::atoi(m[2].str().c_str());
    info.count = std::atoi(m[3].str().c_str());
    info.prefix = m[1].str();
  }
  return info;
}

int quant_bits(const std::string& tag) {
  const size_t digit = tag.find_first_of("0123456789");
  return digit == std::string::npos ? 0 : std::atoi(tag.c_str() + digit);
}

std::vector<std::string> folders_of(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0, slash;
  while ((slash = path.find('/', start)) != std::string::npos) {
    parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

}  // namespace

std::string quant_tag_of(const std::string& path) {
  if (!ends_with(path, ".gguf")) return {};
  static const std::regex kTag("[-.]([A-Z0-9_]+)$", std::regex::icase);
  const std::string prefix = split_info(path).prefix;
  std::smatch m;
  return std::regex_search(prefix, m, kTag) ? upper(m[1].str()) : std::string();
}

int split_count_of(const std::string& path) { return split_info(path).count; }

const RepoFile* find_file(const std::vector<RepoFile>& files, const std::string& path) {
  for (const RepoFile& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

const RepoFile* pick_model_file(const std::vector<RepoFile>& files, const std::string& quant) {
  const std::vector<std::string> tags = quant.empty() ? std::vector<std::string>{"Q4_K_M", "Q8_0"}
                                                      : std::vector<std::string>{quant};
  for (const std::string& tag : tags) {
    // The tag is [A-Za-z0-9_]+ (parse_hub_repo_ref checks), so it is a literal pattern.
    const std::regex pattern(tag + "[.-]", std::regex::icase);
    for (const RepoFile& f : files) {
      if (is_model_gguf(f.path) && split_info(f.path).index == 1 && std::regex_search(f.path, pattern)) return &f;
    }
  }
  if (!quant.empty()) return nullptr;
  for (const RepoFile& f : files) {
    if (is_model_gguf(f.path) && split_info(f.path).index == 1) return &f;
  }
  return nullptr;
}

const RepoFile* pick_mmproj_file(const std::vector<RepoFile>& files, const std::string& model_path) {
  const std::vector<std::string> model_dirs = folders_of(model_path);
  const int model_bits = quant_bits(quant_tag_of(model_path));
  const RepoFile* best = nullptr;
  size_t best_depth = 0;
  int best_diff = 0;
  for (const RepoFile& f : files) {
    if (!ends_with(f.path, ".gguf") || f.path.find("mmproj") == std::string::npos) continue;
    const std::vector<std::string> dirs = folders_of(f.path);
    // Only a projector in the model's folder or one of its parents belongs to it.
    if (dirs.size() > model_dirs.size() || !std::equal(dirs.begin(), dirs.end(), model_dirs.begin())) continue;
    const int diff = std::abs(quant_bits(quant_tag_of(f.path)) - model_bits);
    if (!best || dirs.size() > best_depth || (dirs.size() == best_depth && diff < best_diff)) {
      best = &f;
      best_depth = dirs.size();
      best_diff = diff;
    }
  }
  return best;
}

std::string list_gguf_files(const std::vector<RepoFile>& files) {
  std::string out;
  for (const RepoFile& f : files) {
    if (!ends_with(f.path, ".gguf")) continue;
    if (!out.empty()) out += ", ";
    out += f.path;
    if (const std::string tag = quant_tag_of(f.path); is_model_gguf(f.path) && !tag.empty()) out += " (" + tag + ")";
  }
  return out.empty() ? "no .gguf file at all" : out;
}

}  // namespace vlkv::hub
