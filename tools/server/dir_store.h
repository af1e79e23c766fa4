// vlkv serve --cache-dir: prefix-cache entries evicted from memory are spilled to files
// in DIR (the KV file format, one file per entry, named by its content key) and read back
// when a later request's prompt starts with them (include/vlkv/prefix_store.h,
// docs/prefix_cache.md). Bounded by a size cap, least recently used files removed first.
// Files left by an earlier run are used too: their keys name the model, mmproj and method,
// and a file is checked like any KV file when read back (one from another model, method or
// a broken write is refused, deleted, and its entry recomputed). Files are written by a
// writer thread of its own: put() only queues the value, so neither the stepping thread nor
// a lookup waits for the disk; a queued value is found by get() before it is on disk.
//
// The folder is untrusted ground: DIR is used only when it is new, empty or marked as made
// by vlkv serve (a .vlkv-cache-dir file); entries are vlkv-HEX.kv, the only files ever
// deleted. A lookup opens without following links or blocking (a FIFO is not a file), reads
// only a regular file of the size it recorded and at most the entry cap, and reads without
// the store's lock held (a stalled disk holds up that lookup, not the others). A write goes
// to an mkstemp temporary in DIR, fsync'ed, renamed over the entry (never through a link).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vlkv/prefix_store.h"
#include "vlkv/status.h"

namespace vlkv::server {

struct DirStoreOptions {
  std::string dir;
  uint64_t max_total_bytes = 8ull << 30;  // the files together
  uint64_t max_entry_bytes = 1ull << 30;  // one file
  uint64_t max_queued_bytes = 1ull << 30; // values waiting for the writer (past it a put is dropped)
};

class DirStore : public PrefixStore {
 public:
  // The marker file that makes a folder vlkv serve's.
  static constexpr const char* kMarker = ".vlkv-cache-dir";
  // Creates dir if missing (mode 0700) and marks it; an existing one must be empty (then
  // marked) or marked, else a clear error. Takes stock of the entry files there (oldest
  // first by mtime), removes its own half-written ones, and trims to the cap.
  static Result<std::unique_ptr<DirStore>> open(const DirStoreOptions& options);
  ~DirStore() override;  // writes what is still queued, then stops the writer
  // Blocks until every value queued so far is written (or failed).
  void flush();

  std::optional<std::string> get(const std::string& key) override;
  bool wants(const std::string& key, uint64_t bytes) override;
  void put(const std::string& key, std::string value) override;
  void refused(const std::string& key) override;
  PrefixStoreStats stats() const override;
  uint64_t bytes() const;

 private:
  explicit DirStore(DirStoreOptions options) : options_(std::move(options)) {}
  std::string path_of(const std::string& name) const;
  void add(const std::string& name, uint64_t size);  // lock held
  // Lock held: forgets the entry; its file is to be deleted (by unlink_all, lock released).
  void remove(const std::string& name, std::vector<std::string>& doomed);
  void trim(uint64_t room, std::vector<std::string>& doomed);  // lock held: until room more bytes fit
  static void unlink_all(const std::vector<std::string>& paths);
  void writer_loop();
  bool write_file(const std::string& name, const std::string& value) const;  // no lock held
  // The entry file's bytes when it is a regular file of exactly size bytes (no lock held).
  std::optional<std::string> read_file(const std::string& name, uint64_t size) const;

  struct File {
    uint64_t size = 0;
    std::list<std::string>::iterator lru;
  };
  DirStoreOptions options_;
  mutable std::mutex mutex_;
  std::list<std::string> lru_;  // file names (keys' hex), most recently used first
  std::unordered_map<std::string, File> files_;
  uint64_t bytes_ = 0;
  PrefixStoreStats stats_;
  // Queued for the writer: values by file name, oldest name first. A value stays in pending_
  // while it is written (get() finds it there, and copies it with the lock released).
  std::map<std::string, std::shared_ptr<const std::string>> pending_;
  std::deque<std::string> order_;
  uint64_t pending_bytes_ = 0;
  bool stop_ = false;
  std::condition_variable work_, written_;
  std::thread writer_;
};

// The file name part of a content key ("vlkv:prefix:HEX" -> HEX, at most 96 hex digits);
// "" for anything else.
std::string dir_store_name(const std::string& key);

}  // namespace vlkv::server
