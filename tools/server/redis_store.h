// vlkv serve --redis HOST:PORT: prefix-cache entries shared between replicas through Redis
// (include/vlkv/prefix_store.h, docs/prefix_cache.md). Lookups run on the request's thread
// with a short timeout; writes go through a bounded queue to one writer thread, so neither a
// slow nor a dead Redis ever fails or holds up a request: it is a logged miss, and the store
// is not asked again for a few seconds. What Redis sends is untrusted: each command has one
// deadline for its whole reply (not per read: a reply trickled a byte at a time ends there),
// replies are parsed by resp_reply.h, and a value over the entry cap is refused from STRLEN
// or its header, before its bytes are read.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "vlkv/prefix_store.h"
#include "vlkv/status.h"

struct redisContext;

namespace vlkv::server {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Entries expire this long after their last write (a conversation's next turn comes within
  // minutes; an hour keeps a paused one and lets abandoned ones go).
  int64_t ttl_seconds = 3600;
  // One entry's largest size: a long video's compressed prefix fits, a value that would take
  // seconds to move does not (and Redis refuses values over its 512 MB proto-max-bulk-len).
  uint64_t max_entry_bytes = 256ull << 20;
  // No write while Redis's used_memory (every replica's entries and anything else it holds)
  // plus the entry would pass this: the cap is shared by all replicas writing to one Redis.
  uint64_t max_total_bytes = 4ull << 30;
  // Connect timeout, and a lookup's deadline (STRLEN and the value together) past the time
  // its bytes take at min_bytes_per_second; after a failure Redis is left alone for retry_after.
  std::chrono::milliseconds timeout{200};
  uint64_t min_bytes_per_second = 64ull << 20;
  std::chrono::milliseconds retry_after{2000};
};

// "HOST:PORT" (IPv6 as [ADDR]:PORT) into options.
Status parse_redis_address(const std::string& text, RedisOptions* options);

class RedisStore : public PrefixStore {
 public:
  // Does not connect: a Redis that is down at start is a miss like any other.
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;  // writes still queued are dropped

  std::optional<std::string> get(const std::string& key) override;
  bool wants(const std::string& key, uint64_t bytes) override;
  void put(const std::string& key, std::string value) override;
  void refused(const std::string& key) override;
  PrefixStoreStats stats() const override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Connection;  // one redisContext, reconnected after failures
  void writer_loop();
  void remember(const std::string& key);  // lock held

  RedisOptions options_;
  std::unique_ptr<Connection> reader_, writer_;
  std::timed_mutex read_mutex_;  // one lookup on the reader connection at a time (others wait at most the timeout)
  std::atomic<bool> stopping_{false};  // ends a write in flight at once

  mutable std::mutex mutex_;  // everything below
  std::condition_variable work_;
  std::deque<std::pair<std::string, std::string>> queue_;
  uint64_t queued_bytes_ = 0;
  bool stop_ = false;
  std::list<std::string> recent_;  // keys written or read lately, newest first
  std::unordered_map<std::string, std::list<std::string>::iterator> recent_index_;
  PrefixStoreStats stats_;
  std::thread writer_thread_;
};

}  // namespace vlkv::server
