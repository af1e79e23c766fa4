#include "server/redis_store.h"

#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/log.h"

namespace vlkv::server {
namespace {

constexpr size_t kRecentKeys = 4096;

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

}  // namespace

Status parse_redis_address(const std::string& text, RedisOptions* options) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return invalid_argument("--redis '" + text + "': expected HOST:PORT (e.g. 127.0.0.1:6379)");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p < 1 || p > 65535) return invalid_argument("--redis '" + text + "': port '" + port + "' is not in 1..65535");
  options->host = host;
  options->port = static_cast<int>(p);
  return Status::ok();
}

// One connection, used by one thread at a time. After a failure it is closed and not tried
// again before retry_after: requests meanwhile miss at once instead of each waiting a timeout.
struct RedisStore::Connection {
  const RedisOptions& o;
  const char* role;
  redisContext* c = nullptr;
  std::atomic<int64_t> resting_until{0};  // steady-clock ns
  std::atomic<int64_t> failures{0};
  bool logged_down = false;

  Connection(const RedisOptions& options, const char* r) : o(options), role(r) {}
  ~Connection() { close(); }
  void close() {
    if (c) redisFree(c);
    c = nullptr;
  }
  static int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }
  bool resting() const { return !c && now_ns() < resting_until.load(); }
  void fail(const std::string& why) {
    ++failures;
    if (!logged_down)
      VLKV_LOG_WARN("vlkv serve: redis %s:%d (%s): %s; prefix entries are computed here until it answers", o.host.c_str(),
                    o.port, role, why.c_str());
    logged_down = true;
    close();
    resting_until = now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(o.retry_after).count();
  }
  // The reply, or null: resting, or failed now (logged once until it answers again).
  Reply command(const std::vector<std::string>& args) {
    if (resting()) return nullptr;
    if (!c) {
      c = redisConnectWithTimeout(o.host.c_str(), o.port, to_timeval(o.timeout));
      if (!c || c->err) {
        fail(c ? c->errstr : "cannot allocate a connection");
        return nullptr;
      }
      if (redisSetTimeout(c, to_timeval(o.timeout)) != REDIS_OK) {
        fail("cannot set its timeout");
        return nullptr;
      }
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) {
      fail(c->err ? c->errstr : "no reply");
      return nullptr;
    }
    if (logged_down) VLKV_LOG_WARN("vlkv serve: redis %s:%d (%s): answering again", o.host.c_str(), o.port, role);
    logged_down = false;
    return r;
  }
};

RedisStore::RedisStore(RedisOptions options)
    : options_(std::move(options)),
      reader_(std::make_unique<Connection>(options_, "lookups")),
      writer_(std::make_unique<Connection>(options_, "writes")) {
  stats_.kind = "redis";
  writer_thread_ = std::thread([this] { writer_loop(); });
}

RedisStore::~RedisStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  writer_thread_.join();
}

void RedisStore::remember(const std::string& key) {
  auto it = recent_index_.find(key);
  if (it != recent_index_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second);
    return;
  }
  recent_.push_front(key);
  recent_index_[key] = recent_.begin();
  if (recent_.size() > kRecentKeys) {
    recent_index_.erase(recent_.back());
    recent_.pop_back();
  }
}

std::optional<std::string> RedisStore::get(const std::string& key) {
  std::optional<std::string> found;
  bool oversized = false;
  {
    std::lock_guard<std::mutex> lock(read_mutex_);
    // STRLEN first: a miss costs one small reply, and a value over the entry cap is never
    // read (hiredis would allocate whatever size the server sends).
    Reply len = reader_->command({"STRLEN", key});
    if (len && len->type == REDIS_REPLY_INTEGER && len->integer > 0) {
      if (static_cast<uint64_t>(len->integer) > options_.max_entry_bytes) {
        oversized = true;
      } else if (Reply v = reader_->command({"GET", key});
                 v && v->type == REDIS_REPLY_STRING && v->len <= options_.max_entry_bytes) {
        found.emplace(v->str, v->len);
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!found) {
    ++stats_.misses;
    if (oversized) ++stats_.refused;
    return std::nullopt;
  }
  ++stats_.hits;
  stats_.bytes_read += found->size();
  remember(key);  // read here: not written back by this replica
  return found;
}

bool RedisStore::wants(const std::string& key, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > options_.max_entry_bytes || writer_->resting() || recent_index_.count(key)) return false;
  return queued_bytes_ + bytes <= options_.max_entry_bytes;  // one entry's worth waits at most
}

void RedisStore::put(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (value.size() > options_.max_entry_bytes || queued_bytes_ + value.size() > options_.max_entry_bytes) {
      ++stats_.dropped;
      return;
    }
    remember(key);
    queued_bytes_ += value.size();
    queue_.emplace_back(key, std::move(value));
  }
  work_.notify_one();
}

void RedisStore::refused(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.refused;
  // Written again (over the refused value) when this replica has computed it.
  if (auto it = recent_index_.find(key); it != recent_index_.end()) {
    recent_.erase(it->second);
    recent_index_.erase(it);
  }
}

void RedisStore::writer_loop() {
  uint64_t used = 0;             // Redis's used_memory as last read, plus what was written since
  Clock::time_point used_at{};   // when it was read (re-read every second)
  for (;;) {
    std::pair<std::string, std::string> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= item.second.size();
    }
    const uint64_t size = item.second.size();
    bool written = false, full = false;
    if (Clock::now() - used_at > std::chrono::seconds(1)) {
      if (Reply info = writer_->command({"INFO", "memory"}); info && info->type == REDIS_REPLY_STRING) {
        const std::string text(info->str, info->len);
        const size_t at = text.find("used_memory:");
        used = at == std::string::npos ? 0 : std::strtoull(text.c_str() + at + 12, nullptr, 10);
        used_at = Clock::now();
      }
    }
    if (used + size > options_.max_total_bytes) {
      full = true;
    } else if (Reply r = writer_->command({"SET", item.first, item.second, "EX", std::to_string(options_.ttl_seconds)});
               r && r->type == REDIS_REPLY_STATUS) {
      written = true;
      used += size;
    } else if (r && r->type == REDIS_REPLY_ERROR) {
      VLKV_LOG_WARN("vlkv serve: redis %s:%d refused a %llu-byte prefix entry: %s", options_.host.c_str(), options_.port,
                    static_cast<unsigned long long>(size), r->str);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (written) {
      ++stats_.writes;
      stats_.bytes_written += size;
    } else {
      ++stats_.dropped;
      if (auto it = recent_index_.find(item.first); it != recent_index_.end() && !full) {
        recent_.erase(it->second);  // not stored: may be offered again
        recent_index_.erase(it);
      }
    }
  }
}

PrefixStoreStats RedisStore::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrefixStoreStats s = stats_;
  s.errors = reader_->failures + writer_->failures;
  return s;
}

}  // namespace vlkv::server
