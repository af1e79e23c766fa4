#include "server/redis_store.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "server/resp_reply.h"

namespace vlkv::server {
namespace {

constexpr size_t kRecentKeys = 4096;

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
// hiredis connects; commands are written and replies read here, on the non-blocking socket,
// each against one deadline.
struct RedisStore::Connection {
  const RedisOptions& o;
  const char* role;
  const std::atomic<bool>& stopping;
  redisContext* c = nullptr;
  std::atomic<int64_t> resting_until{0};  // steady-clock ns
  std::atomic<int64_t> failures{0};
  bool logged_down = false;

  Connection(const RedisOptions& options, const char* r, const std::atomic<bool>& stop) : o(options), role(r), stopping(stop) {}
  ~Connection() { close(); }
  void close() {
    if (c) redisFree(c);
    c = nullptr;
  }
  static int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }
  bool resting() const { return !c && now_ns() < resting_until.load(); }
  void fail(const std::string& why) {
    ++failures;
    if (!logged_down && !stopping)
      VLKV_LOG_WARN("vlkv serve: redis %s:%d (%s): %s; prefix entries are computed here until it answers", o.host.c_str(),
                    o.port, role, why.c_str());
    logged_down = true;
    close();
    resting_until = now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(o.retry_after).count();
  }
  // Waits (in slices, so that stopping is seen) until fd is ready for events or the deadline.
  bool wait(short events, Clock::time_point deadline) {
    for (;;) {
      if (stopping) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{c->fd, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 50)));
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) return false;
    }
  }
  bool send_all(std::string_view bytes, Clock::time_point deadline) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(c->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait(POLLOUT, deadline)) continue;
      return false;
    }
    return true;
  }
  // The reply to args (bulk strings up to max_bulk bytes, in *bulk), or nothing: resting, or
  // failed now (logged once until it answers again). The whole exchange ends by deadline.
  std::optional<RespReply> command(const std::vector<std::string_view>& args, Clock::time_point deadline, uint64_t max_bulk,
                                   std::string* bulk = nullptr) {
    if (resting()) return std::nullopt;
    if (!c) {
      c = redisConnectWithTimeout(o.host.c_str(), o.port, to_timeval(o.timeout));
      if (!c || c->err) {
        fail(c ? c->errstr : "cannot allocate a connection");
        return std::nullopt;
      }
      const int flags = ::fcntl(c->fd, F_GETFL);
      if (flags < 0 || ::fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        fail("cannot make its socket non-blocking");
        return std::nullopt;
      }
    }
    // RESP: *N, then $LEN and the bytes of each argument.
    std::string head(1, '*');
    head.append(std::to_string(args.size())).append("\r\n");
    bool sent = true;
    for (std::string_view a : args) {  // a value is sent from where it lies, not copied
      head.append(1, '$').append(std::to_string(a.size())).append("\r\n");
      sent = sent && send_all(head, deadline) && send_all(a, deadline);
      head.assign("\r\n");
    }
    if (!sent || !send_all(head, deadline)) {
      fail(stopping ? "stopping" : "cannot send a command within its deadline");
      return std::nullopt;
    }
    std::string buf;
    for (;;) {
      if (Clock::now() > deadline) {  // data keeps coming, slower than the deadline allows
        fail("no whole reply within its deadline");
        return std::nullopt;
      }
      RespReply r;
      size_t used = 0, expected = 0;
      const RespParse p = parse_resp_reply(buf, max_bulk, &r, &used, &expected);
      if (p == RespParse::kDone) {
        if (used != buf.size()) {  // more than one reply to one command: out of step
          fail("sent more than one reply");
          return std::nullopt;
        }
        if (logged_down) VLKV_LOG_WARN("vlkv serve: redis %s:%d (%s): answering again", o.host.c_str(), o.port, role);
        logged_down = false;
        if (bulk && (r.type == RespReply::kBulk || r.type == RespReply::kStatus || r.type == RespReply::kError)) {
          buf.resize(r.at + r.len);
          buf.erase(0, r.at);
          *bulk = std::move(buf);
        }
        return r;
      }
      if (p == RespParse::kBad || p == RespParse::kTooLarge) {
        fail(p == RespParse::kBad ? "sent a reply that is not one of those expected"
                                  : "sent a value over the entry cap (not read)");
        return std::nullopt;
      }
      if (expected > buf.capacity()) buf.reserve(expected);
      const size_t want = std::max<size_t>(expected > buf.size() ? expected - buf.size() : 0, 16 << 10);
      const size_t old = buf.size();
      buf.resize(old + std::min<size_t>(want, 4 << 20));
      const ssize_t n = ::recv(c->fd, buf.data() + old, buf.size() - old, 0);
      buf.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait(POLLIN, deadline)) continue;
      fail(n == 0 ? "closed the connection"
                  : stopping ? "stopping" : "no whole reply within " + std::to_string(o.timeout.count()) + " ms");
      return std::nullopt;
    }
  }
  // How long bytes take at the slowest rate accepted, past the timeout.
  std::chrono::nanoseconds allowance(uint64_t bytes) const {
    const double rate = static_cast<double>(std::max<uint64_t>(o.min_bytes_per_second, 1));
    return o.timeout + std::chrono::nanoseconds(static_cast<int64_t>(1e9 * static_cast<double>(bytes) / rate));
  }
};

RedisStore::RedisStore(RedisOptions options)
    : options_(std::move(options)),
      reader_(std::make_unique<Connection>(options_, "lookups", stopping_)),
      writer_(std::make_unique<Connection>(options_, "writes", stopping_)) {
  stats_.kind = "redis";
  writer_thread_ = std::thread([this] { writer_loop(); });
}

RedisStore::~RedisStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stopping_ = true;
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
  const Clock::time_point start = Clock::now();
  std::unique_lock<std::timed_mutex> reading(read_mutex_, std::defer_lock);
  if (reading.try_lock_until(start + options_.timeout)) {
    // STRLEN first: a miss costs one small reply, and a value over the entry cap is never
    // read. GETRANGE then reads at most the cap (the value may have grown meanwhile), and
    // its reply's header is checked against the cap before its body is read.
    constexpr uint64_t kNoBulk = 0;
    std::optional<RespReply> len = reader_->command({"STRLEN", key}, start + options_.timeout, kNoBulk);
    if (len && len->type == RespReply::kInteger && len->integer > 0) {
      const uint64_t n = static_cast<uint64_t>(len->integer);
      if (n > options_.max_entry_bytes) {
        oversized = true;
      } else {
        std::string value;
        const std::string last = std::to_string(options_.max_entry_bytes - 1);
        std::optional<RespReply> v = reader_->command({"GETRANGE", key, "0", last}, start + reader_->allowance(n),
                                                      options_.max_entry_bytes, &value);
        // Another length than STRLEN's: replaced meanwhile, a miss (not a forgery to report).
        if (v && v->type == RespReply::kBulk && value.size() == n) found = std::move(value);
      }
    }
    reading.unlock();
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
    constexpr uint64_t kMaxInfo = 1 << 20;
    if (Clock::now() - used_at > std::chrono::seconds(1)) {
      std::string text;
      if (std::optional<RespReply> info = writer_->command({"INFO", "memory"}, Clock::now() + options_.timeout, kMaxInfo, &text);
          info && info->type == RespReply::kBulk) {
        const size_t at = text.find("used_memory:");
        used = at == std::string::npos ? 0 : std::strtoull(text.c_str() + at + 12, nullptr, 10);
        used_at = Clock::now();
      }
    }
    std::string answer;
    if (used + size > options_.max_total_bytes) {
      full = true;
    } else if (std::optional<RespReply> r =
                   writer_->command({"SET", item.first, item.second, "EX", std::to_string(options_.ttl_seconds)},
                                    Clock::now() + writer_->allowance(size), 0, &answer);
               r && r->type == RespReply::kStatus) {
      written = true;
      used += size;
    } else if (r && r->type == RespReply::kError) {
      VLKV_LOG_WARN("vlkv serve: redis %s:%d refused a %llu-byte prefix entry: %.200s", options_.host.c_str(), options_.port,
                    static_cast<unsigned long long>(size), answer.c_str());
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
