#include "hub/hub_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>

namespace vlkv::hub {
namespace fs = std::filesystem;
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

Result<fs::path> hub_cache_dir() {
  struct Entry {
    const char* var;
    const char* sub;
  };
  static constexpr Entry kEntries[] = {{"LLAMA_CACHE", ""},
                                       {"HF_HUB_CACHE", ""},
                                       {"HUGGINGFACE_HUB_CACHE", ""},
                                       {"HF_HOME", "hub"},
                                       {"XDG_CACHE_HOME", "huggingface/hub"},
                                       {"HOME", ".cache/huggingface/hub"}};
  for (const Entry& e : kEntries) {
    const std::string base = env(e.var);
    if (!base.empty()) return *e.sub ? fs::path(base) / e.sub : fs::path(base);
  }
  return not_found("no cache folder for downloaded models: set LLAMA_CACHE or HOME");
}

Result<fs::path> url_cache_dir() {
  if (std::string v = env("LLAMA_CACHE"); !v.empty()) return fs::path(v);
  if (std::string v = env("XDG_CACHE_HOME"); !v.empty()) return fs::path(v) / "llama.cpp";
  if (std::string v = env("HOME"); !v.empty()) return fs::path(v) / ".cache" / "llama.cpp";
  return not_found("no cache folder for downloaded models: set LLAMA_CACHE or HOME");
}

fs::path repo_cache_dir(const fs::path& cache, const std::string& repo) {
  std::string name = "models--";
  for (char c : repo) {
    if (c == '/') name += "--";
    else name += c;
  }
  return cache / name;
}

bool is_hex(const std::string& s, size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

bool is_safe_relative_path(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part) {
      if (static_cast<unsigned char>(c) < 0x20 || c == '\\') return false;
    }
    start = end + 1;
  }
  return true;
}

Status write_ref(const fs::path& repo_dir, const std::string& branch, const std::string& commit) {
  if (branch.find('/') != std::string::npos || !is_safe_relative_path(branch) || !is_hex(commit, 40))
    return invalid_argument("refusing ref '" + branch + "' -> '" + commit + "'");
  std::error_code ec;
  fs::create_directories(repo_dir / "refs", ec);
  const fs::path final_path = repo_dir / "refs" / branch;
  // A name of its own: two processes refreshing the same ref must not rename each other's file.
  static std::atomic<unsigned> counter{0};
  const fs::path tmp = final_path.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    if (!out.flush()) return io_error(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return io_error(final_path.string() + ": cannot write");
  }
  return Status::ok();
}

std::string read_cached_commit(const fs::path& repo_dir) {
  std::error_code ec;
  const fs::path refs = repo_dir / "refs";
  if (!fs::is_directory(refs, ec)) return {};
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::string commit;
    std::getline(in, commit);
    return is_hex(commit, 40) ? commit : std::string();
  };
  if (std::string main = read(refs / "main"); !main.empty()) return main;
  std::vector<fs::path> others;
  for (const auto& e : fs::directory_iterator(refs, ec)) {
    if (e.is_regular_file(ec)) others.push_back(e.path());
  }
  std::sort(others.begin(), others.end());
  for (const fs::path& p : others) {
    if (std::string c = read(p); !c.empty()) return c;
  }
  return {};
}

std::vector<RepoFile> cached_snapshot_files(const fs::path& repo_dir, const std::string& commit) {
  std::vector<RepoFile> files;
  if (!is_hex(commit, 40)) return files;
  const fs::path root = repo_dir / "snapshots" / commit;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!fs::is_regular_file(it->path(), ec)) continue;  // follows the link: a dangling one is skipped
    RepoFile f;
    f.path = it->path().lexically_relative(root).generic_string();
    if (!is_safe_relative_path(f.path)) continue;
    f.size = static_cast<int64_t>(fs::file_size(it->path(), ec));
    files.push_back(std::move(f));
  }
  std::sort(files.begin(), files.end(), [](const RepoFile& a, const RepoFile& b) { return a.path < b.path; });
  return files;
}

fs::path snapshot_path(const fs::path& repo_dir, const std::string& commit, const std::string& path) {
  return repo_dir / "snapshots" / commit / path;
}

fs::path download_path(const fs::path& repo_dir, const std::string& commit, const RepoFile& file) {
  const fs::path snap = snapshot_path(repo_dir, commit, file.path);
  std::error_code ec;
  if (file.oid.empty() || fs::exists(snap, ec)) return snap;
  return repo_dir / "blobs" / file.oid;
}

Status link_snapshot(const fs::path& blob, const fs::path& snapshot) {
  std::error_code ec;
  if (blob == snapshot || fs::exists(snapshot, ec)) return Status::ok();
  fs::create_directories(snapshot.parent_path(), ec);
  fs::remove(snapshot, ec);  // a dangling link left by an interrupted run
  const fs::path target = fs::relative(blob, snapshot.parent_path(), ec);
  if (!ec) fs::create_symlink(target, snapshot, ec);
  if (!ec) return Status::ok();
  ec.clear();
  fs::rename(blob, snapshot, ec);  // no symlinks here: the snapshot holds the file itself
  if (ec) return io_error(snapshot.string() + ": cannot link or move the download there: " + ec.message());
  return Status::ok();
}

}  // namespace vlkv::hub
