// A second tier for the Scheduler's prefix cache (docs/prefix_cache.md): a store outside the
// process that entries are written to and read back from, so that a replica (Redis) or a
// later moment (a directory on disk) finds what another computed. Keys are content keys
// (hex: the model's and mmproj's identities, the KV method, the pass size and every row's
// content); values are KV file images (docs/kv_file.md), checked on the way back exactly
// like a file from disk, so a store may lose, truncate or corrupt anything: the request then
// recomputes. What another process can write is untrusted: vlkv serve wraps its stores in an
// AuthenticatedStore (tools/server/authenticated_store.h) that signs every value under the
// deployment's secret and refuses (as forged) one whose MAC fails, before it is parsed.
// Implementations are thread safe and bounded in time; a failure is a miss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vlkv {

struct PrefixStoreStats {
  std::string kind;               // "redis", "dir"
  int64_t hits = 0, misses = 0;   // lookups that found a value or none (errors included)
  int64_t refused = 0;            // values found but refused by the checks (corrupt, other model, over budget)
  int64_t forged = 0;             // of those, values whose MAC failed (not written under this deployment's secret)
  int64_t errors = 0;             // failed or timed-out operations (store down or slow)
  int64_t writes = 0;             // values stored
  int64_t dropped = 0;            // values not stored (over a size cap, store down, queue full)
  uint64_t bytes_read = 0, bytes_written = 0;
};

class PrefixStore {
 public:
  virtual ~PrefixStore() = default;
  // The value under key, or nothing (absent, or the store failed: then logged and counted).
  virtual std::optional<std::string> get(const std::string& key) = 0;
  // Whether a value for key is worth making: false when it was written or read here
  // recently (another replica's turn found it), or the store takes no writes now.
  virtual bool wants(const std::string& key, uint64_t bytes) = 0;
  // Stores value under key (may be asynchronous, may drop it).
  virtual void put(const std::string& key, std::string value) = 0;
  // A value found under key was refused (counted; the store may delete it).
  virtual void refused(const std::string& key) = 0;
  virtual PrefixStoreStats stats() const = 0;
};

}  // namespace vlkv
