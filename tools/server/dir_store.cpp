#include "server/dir_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "base/log.h"

namespace vlkv::server {
namespace fs = std::filesystem;

std::string dir_store_name(const std::string& key) {
  constexpr const char* kPrefix = "vlkv:prefix:";
  if (key.rfind(kPrefix, 0) != 0) return "";
  const std::string hex = key.substr(std::char_traits<char>::length(kPrefix));
  const bool ok = !hex.empty() && hex.size() <= 64 &&
                  std::all_of(hex.begin(), hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  return ok ? hex : "";
}

Result<std::unique_ptr<DirStore>> DirStore::open(const DirStoreOptions& options) {
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (!fs::is_directory(options.dir, ec))
    return invalid_argument("--cache-dir " + options.dir + ": not a directory and cannot be created");
  std::unique_ptr<DirStore> s(new DirStore(options));
  s->stats_.kind = "dir";
  struct Found {
    std::string name;
    uint64_t size;
    fs::file_time_type time;
  };
  std::vector<Found> found;
  for (const fs::directory_entry& d : fs::directory_iterator(options.dir, ec)) {
    const fs::path p = d.path();
    if (p.extension() == ".tmp" && dir_store_name("vlkv:prefix:" + p.stem().stem().string()) != "") {
      fs::remove(p, ec);  // a write that did not finish
      continue;
    }
    if (p.extension() != ".kv" || !d.is_regular_file(ec)) continue;
    const std::string name = p.stem().string();
    if (dir_store_name("vlkv:prefix:" + name) != name) continue;  // not ours: left alone
    found.push_back({name, static_cast<uint64_t>(d.file_size(ec)), d.last_write_time(ec)});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.time < b.time; });
  {
    std::lock_guard<std::mutex> lock(s->mutex_);
    for (const Found& f : found) s->add(f.name, f.size);  // the newest ends up first
    s->trim(0);
  }
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

// Written whole under a temporary name, then renamed: a reader never sees half a file.
bool DirStore::write_file(const std::string& name, const std::string& value) const {
  const std::string path = path_of(name), tmp = path + ".tmp";
  bool ok = false;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    ok = f && f.write(value.data(), static_cast<std::streamsize>(value.size())) && f.flush();
  }
  std::error_code ec;
  if (ok) fs::rename(tmp, path, ec);
  if (ok && !ec) return true;
  fs::remove(tmp, ec);
  return false;
}

void DirStore::writer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !order_.empty(); });
    if (order_.empty()) return;  // stopping, everything written
    const std::string name = order_.front();
    const std::string& value = pending_.at(name);
    const uint64_t size = value.size();
    trim(size);
    lock.unlock();
    const bool ok = write_file(name, value);
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

void DirStore::remove(const std::string& name) {
  auto it = files_.find(name);
  if (it == files_.end()) return;
  std::error_code ec;
  fs::remove(path_of(name), ec);
  bytes_ -= it->second.size;
  lru_.erase(it->second.lru);
  files_.erase(it);
}

void DirStore::trim(uint64_t room) {
  while (!lru_.empty() && bytes_ + room > options_.max_total_bytes) remove(lru_.back());
}

std::optional<std::string> DirStore::get(const std::string& key) {
  const std::string name = dir_store_name(key);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto q = name.empty() ? pending_.end() : pending_.find(name); q != pending_.end()) {
    ++stats_.hits;  // queued for the writer, not on disk yet
    stats_.bytes_read += q->second.size();
    return q->second;
  }
  auto it = name.empty() ? files_.end() : files_.find(name);
  if (it == files_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  std::ifstream f(path_of(name), std::ios::binary | std::ios::ate);
  const std::streamoff size = f ? static_cast<std::streamoff>(f.tellg()) : -1;
  if (size <= 0 || static_cast<uint64_t>(size) > options_.max_entry_bytes) {
    if (size > 0) ++stats_.refused;
    else ++stats_.errors;
    remove(name);  // gone or grown past the cap: forget it
    ++stats_.misses;
    return std::nullopt;
  }
  std::string value(static_cast<size_t>(size), '\0');
  f.seekg(0);
  if (!f.read(value.data(), size)) {
    ++stats_.errors;
    ++stats_.misses;
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  ++stats_.hits;
  stats_.bytes_read += value.size();
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
    if (name.empty() || value.size() > options_.max_entry_bytes || value.size() > options_.max_total_bytes ||
        files_.count(name) || pending_.count(name) || pending_bytes_ + value.size() > options_.max_queued_bytes) {
      ++stats_.dropped;
      return;
    }
    pending_bytes_ += value.size();
    order_.push_back(name);
    pending_.emplace(name, std::move(value));
  }
  work_.notify_one();
}

void DirStore::refused(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.refused;
  remove(dir_store_name(key));  // broken or foreign: recomputed, then spilled again
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
