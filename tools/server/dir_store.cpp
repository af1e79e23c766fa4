#include "server/dir_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/log.h"

namespace vlkv::server {
namespace fs = std::filesystem;
namespace {

constexpr const char* kEntryPrefix = "vlkv-";
constexpr const char* kEntrySuffix = ".kv";
constexpr const char* kTempInfix = ".tmp.";  // vlkv-HEX.kv.tmp.XXXXXX (mkstemp)
constexpr const char* kMarkerText = "vlkv serve --cache-dir: files named vlkv-*.kv here are its prefix-cache entries\n";

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The entry name of a file name we write ("vlkv-HEX.kv" -> HEX), "" for any other.
std::string entry_name(std::string_view file) {
  const std::string_view pre = kEntryPrefix, suf = kEntrySuffix;
  if (file.size() <= pre.size() + suf.size() || file.substr(0, pre.size()) != pre || file.substr(file.size() - suf.size()) != suf)
    return "";
  const std::string_view hex = file.substr(pre.size(), file.size() - pre.size() - suf.size());
  return hex.size() <= 96 && is_hex(hex) ? std::string(hex) : "";
}

// Whether a file name is one of our temporaries ("vlkv-HEX.kv.tmp.XXXXXX").
bool is_temp_name(std::string_view file) {
  const size_t at = file.find(kTempInfix);
  if (at == std::string_view::npos || file.size() != at + std::strlen(kTempInfix) + 6) return false;
  return !entry_name(file.substr(0, at)).empty();
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Makes dir vlkv serve's: created (0700) when absent, else it must be a directory that holds
// the marker already or nothing at all (then the marker is written).
Status claim_folder(const std::string& dir) {
  const std::string what = "--cache-dir " + dir;
  std::error_code ec;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return invalid_argument(what + ": " + std::strerror(errno));
    const fs::path parent = fs::path(dir).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return invalid_argument(what + ": cannot create it: " + std::strerror(errno));
    if (::stat(dir.c_str(), &st) != 0) return invalid_argument(what + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return invalid_argument(what + ": not a directory");
  const std::string marker = dir + "/" + DirStore::kMarker;
  struct stat ms;
  if (::lstat(marker.c_str(), &ms) == 0) {
    if (!S_ISREG(ms.st_mode)) return invalid_argument(what + ": " + DirStore::kMarker + " in it is not a regular file");
    return Status::ok();
  }
  DIR* d = ::opendir(dir.c_str());
  if (!d) return invalid_argument(what + ": cannot list it: " + std::strerror(errno));
  bool empty = true;
  while (const dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  ::closedir(d);
  if (!empty)
    return invalid_argument(what + ": the folder holds files and was not made by vlkv serve (no " + DirStore::kMarker +
                            " in it); give a new or empty folder (vlkv serve deletes files, its own only, in a folder it owns). A folder "
                            "written by a vlkv serve from before signed entries: empty it (its entries would be misses)");
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  const bool ok = fd >= 0 && write_all(fd, kMarkerText, std::strlen(kMarkerText));
  if (fd >= 0) ::close(fd);
  if (!ok) return invalid_argument(what + ": cannot write " + DirStore::kMarker + " in it: " + std::strerror(errno));
  return Status::ok();
}

}  // namespace

std::string dir_store_name(const std::string& key) {
  constexpr const char* kPrefix = "vlkv:prefix:";
  if (key.rfind(kPrefix, 0) != 0) return "";
  const std::string hex = key.substr(std::char_traits<char>::length(kPrefix));
  return !hex.empty() && hex.size() <= 96 && is_hex(hex) ? hex : "";
}

std::string DirStore::path_of(const std::string& name) const { return options_.dir + "/" + kEntryPrefix + name + kEntrySuffix; }

Result<std::unique_ptr<DirStore>> DirStore::open(const DirStoreOptions& options) {
  if (Status st = claim_folder(options.dir); !st.is_ok()) return st;
  std::unique_ptr<DirStore> s(new DirStore(options));
  s->stats_.kind = "dir";
  struct Found {
    std::string name;
    uint64_t size;
    int64_t time;
  };
  std::vector<Found> found;
  std::vector<std::string> doomed;  // our own files to delete: half-written or over the entry cap
  DIR* d = ::opendir(options.dir.c_str());
  if (!d) return invalid_argument("--cache-dir " + options.dir + ": cannot list it: " + std::strerror(errno));
  while (const dirent* e = ::readdir(d)) {
    const std::string file = e->d_name, path = options.dir + "/" + file;
    const std::string name = entry_name(file);
    const bool temp = name.empty() && is_temp_name(file);
    struct stat st;
    if ((name.empty() && !temp) || ::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // not ours: left alone
    if (temp || static_cast<uint64_t>(st.st_size) > options.max_entry_bytes || st.st_size == 0) doomed.push_back(path);
    else found.push_back({name, static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  ::closedir(d);
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.time < b.time; });
  {
    std::lock_guard<std::mutex> lock(s->mutex_);
    for (const Found& f : found) s->add(f.name, f.size);  // the newest ends up first
    s->trim(0, doomed);
  }
  unlink_all(doomed);
  s->writer_ = std::thread([p = s.get()] { p->writer_loop(); });
  return s;
}

DirStore::~DirStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void DirStore::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  written_.wait(lock, [&] { return order_.empty(); });
}

// Written whole to a fresh temporary (mkstemp: O_EXCL, so nothing planted at its name is
// opened), fsync'ed, then renamed over the entry's name: a reader never sees half a file,
// and rename replaces a link planted at the name instead of writing through it.
bool DirStore::write_file(const std::string& name, const std::string& value) const {
  const std::string path = path_of(name);
  std::string tmp = path + kTempInfix + "XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write_all(fd, value.data(), value.size()) && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  struct stat st;
  if (ok && ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    VLKV_LOG_WARN("vlkv serve: --cache-dir %s: %s is not a regular file; not replaced", options_.dir.c_str(), path.c_str());
    ok = false;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return true;
  ::unlink(tmp.c_str());
  return false;
}

std::optional<std::string> DirStore::read_file(const std::string& name, uint64_t size) const {
  if (size == 0 || size > options_.max_entry_bytes) return std::nullopt;
  const int fd = ::open(path_of(name).c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<std::string> value;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == size) {
    value.emplace(static_cast<size_t>(size), '\0');
    size_t got = 0;
    while (got < size) {
      const ssize_t n = ::read(fd, value->data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != size) value.reset();
  }
  ::close(fd);
  return value;
}

void DirStore::writer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !order_.empty(); });
    if (order_.empty()) return;  // stopping, everything written
    const std::string name = order_.front();
    const std::shared_ptr<const std::string> value = pending_.at(name);
    const uint64_t size = value->size();
    std::vector<std::string> doomed;
    trim(size, doomed);
    lock.unlock();
    unlink_all(doomed);
    const bool ok = write_file(name, *value);
    lock.lock();
    pending_.erase(name);
    order_.pop_front();
    pending_bytes_ -= size;
    if (ok) {
      add(name, size);
      ++stats_.writes;
      stats_.bytes_written += size;
    } else {
      ++stats_.errors;
      ++stats_.dropped;
      VLKV_LOG_WARN("vlkv serve: --cache-dir %s: cannot write a %llu-byte entry (disk full?)", options_.dir.c_str(),
                    static_cast<unsigned long long>(size));
    }
    written_.notify_all();
  }
}

void DirStore::add(const std::string& name, uint64_t size) {
  lru_.push_front(name);
  files_[name] = File{size, lru_.begin()};
  bytes_ += size;
}

void DirStore::remove(const std::string& name, std::vector<std::string>& doomed) {
  auto it = files_.find(name);
  if (it == files_.end()) return;
  doomed.push_back(path_of(name));
  bytes_ -= it->second.size;
  lru_.erase(it->second.lru);
  files_.erase(it);
}

void DirStore::unlink_all(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) ::unlink(p.c_str());
}

void DirStore::trim(uint64_t room, std::vector<std::string>& doomed) {
  while (!lru_.empty() && bytes_ + room > options_.max_total_bytes) remove(lru_.back(), doomed);
}

std::optional<std::string> DirStore::get(const std::string& key) {
  const std::string name = dir_store_name(key);
  std::shared_ptr<const std::string> queued;
  uint64_t size = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto q = name.empty() ? pending_.end() : pending_.find(name); q != pending_.end()) {
      queued = q->second;  // queued for the writer, not on disk yet
      ++stats_.hits;
      stats_.bytes_read += queued->size();
    } else if (auto it = name.empty() ? files_.end() : files_.find(name); it != files_.end()) {
      size = it->second.size;
    } else {
      ++stats_.misses;
      return std::nullopt;
    }
  }
  if (queued) return *queued;
  std::optional<std::string> value = read_file(name, size);  // no lock held: the disk may stall
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = files_.find(name);
    if (!value) {
      ++stats_.errors;  // gone, replaced by something else, or not the size written: forgotten
      ++stats_.misses;
      if (it != files_.end() && it->second.size == size) remove(name, doomed);
    } else {
      if (it != files_.end()) lru_.splice(lru_.begin(), lru_, it->second.lru);
      ++stats_.hits;
      stats_.bytes_read += value->size();
    }
  }
  unlink_all(doomed);
  return value;
}

bool DirStore::wants(const std::string& key, uint64_t bytes) {
  const std::string name = dir_store_name(key);
  std::lock_guard<std::mutex> lock(mutex_);
  return !name.empty() && bytes <= options_.max_entry_bytes && bytes <= options_.max_total_bytes && !files_.count(name) &&
         !pending_.count(name);
}

void DirStore::put(const std::string& key, std::string value) {
  const std::string name = dir_store_name(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (name.empty() || value.empty() || value.size() > options_.max_entry_bytes || value.size() > options_.max_total_bytes ||
        files_.count(name) || pending_.count(name) || pending_bytes_ + value.size() > options_.max_queued_bytes) {
      ++stats_.dropped;
      return;
    }
    pending_bytes_ += value.size();
    order_.push_back(name);
    pending_.emplace(name, std::make_shared<const std::string>(std::move(value)));
  }
  work_.notify_one();
}

void DirStore::refused(const std::string& key) {
  std::vector<std::string> doomed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.refused;
    remove(dir_store_name(key), doomed);  // broken or foreign: recomputed, then spilled again
  }
  unlink_all(doomed);
}

PrefixStoreStats DirStore::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

uint64_t DirStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace vlkv::server
