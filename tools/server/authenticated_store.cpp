#include "server/authenticated_store.h"

#include "base/log.h"

namespace vlkv::server {

AuthenticatedStore::AuthenticatedStore(std::shared_ptr<PrefixStore> inner, std::string_view secret, uint64_t max_queued_bytes)
    : inner_(std::move(inner)), signer_(secret), max_queued_bytes_(max_queued_bytes) {
  thread_ = std::thread([this] { signer_loop(); });
}

AuthenticatedStore::~AuthenticatedStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void AuthenticatedStore::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !signing_; });
}

std::string AuthenticatedStore::store_key(const std::string& key) const {
  constexpr std::string_view kPrefix = "vlkv:prefix:";
  if (key.rfind(kPrefix, 0) == 0) return std::string(kPrefix) + signer_.id() + key.substr(kPrefix.size());
  return signer_.id() + ":" + key;
}

bool AuthenticatedStore::queued(const std::string& k) const {
  for (const auto& [key, value] : queue_)
    if (key == k) return true;
  return false;
}

void AuthenticatedStore::signer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, everything handed over
    auto [key, value] = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= value.size();
    signing_ = true;
    lock.unlock();
    signer_.seal(key, value);
    inner_->put(key, std::move(value));
    lock.lock();
    signing_ = false;
    idle_.notify_all();
  }
}

std::optional<std::string> AuthenticatedStore::get(const std::string& key) {
  const std::string k = store_key(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [queued_key, value] : queue_)
      if (queued_key == k) {
        ++queue_hits_;
        return value;  // made here, not signed yet
      }
  }
  std::optional<std::string> value = inner_->get(k);
  if (!value || signer_.open(k, *value)) return value;
  ++forged_;
  if (!logged_.exchange(true))
    VLKV_LOG_WARN("vlkv serve: prefix store (%s): the entry under %s (%zu bytes) is not signed with this deployment's "
                  "--cache-secret-file (forged, or written before entries were signed): refused and recomputed; "
                  "further ones are only counted (vlkv:prefix_store_forged_total)",
                  inner_->stats().kind.c_str(), k.c_str(), value->size());
  inner_->refused(k);
  return std::nullopt;
}

bool AuthenticatedStore::wants(const std::string& key, uint64_t bytes) {
  const std::string k = store_key(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued(k) || queued_bytes_ + bytes > max_queued_bytes_) return false;
  }
  return inner_->wants(k, bytes + kEnvelopeTrailerBytes);
}

void AuthenticatedStore::put(const std::string& key, std::string value) {
  std::string k = store_key(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued(k) || queued_bytes_ + value.size() > max_queued_bytes_) {
      ++dropped_;
      return;
    }
    queued_bytes_ += value.size();
    queue_.emplace_back(std::move(k), std::move(value));
  }
  work_.notify_one();
}

void AuthenticatedStore::refused(const std::string& key) { inner_->refused(store_key(key)); }

PrefixStoreStats AuthenticatedStore::stats() const {
  PrefixStoreStats s = inner_->stats();
  const int64_t forged = forged_.load();
  s.forged = forged;  // the inner store counted them as hits (and refused)
  s.hits -= forged;
  s.misses += forged;
  std::lock_guard<std::mutex> lock(mutex_);
  s.dropped += dropped_;
  s.hits += queue_hits_;
  return s;
}

}  // namespace vlkv::server
