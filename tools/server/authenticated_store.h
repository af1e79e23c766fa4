// A PrefixStore that signs what it puts and verifies what it gets (entry_envelope.h), around
// the store that holds the bytes (Redis, a directory): whoever can write to that store but
// lacks the deployment's secret cannot plant an entry. A value whose MAC fails is a miss,
// counted (stats().forged, also in refused), logged once, handed to the inner store's
// refused() (a directory deletes it) and never parsed. Keys carry the secret's id, so
// deployments with different secrets sharing one store never meet.
// put() only queues the value: a thread of its own signs it (SHA-256 runs at ~2 GB/s, so a
// large entry would otherwise cost the stepping thread that hands it over a step's time) and
// passes it to the inner store. A value waiting to be signed is found by get().
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/entry_envelope.h"
#include "vlkv/prefix_store.h"

namespace vlkv::server {

class AuthenticatedStore : public PrefixStore {
 public:
  // max_queued_bytes: values waiting to be signed (past it a put is dropped and counted).
  AuthenticatedStore(std::shared_ptr<PrefixStore> inner, std::string_view secret, uint64_t max_queued_bytes = 1ull << 30);
  ~AuthenticatedStore() override;  // signs and hands over what is still queued, then stops
  // Blocks until every value queued so far is handed to the inner store.
  void flush();

  std::optional<std::string> get(const std::string& key) override;
  bool wants(const std::string& key, uint64_t bytes) override;
  void put(const std::string& key, std::string value) override;
  void refused(const std::string& key) override;
  PrefixStoreStats stats() const override;

  // The key the inner store holds key's entry under: "vlkv:prefix:HEX" -> "vlkv:prefix:ID" HEX
  // (ID: the secret's id, 16 hex digits; still a content key for DirStore's names).
  std::string store_key(const std::string& key) const;
  PrefixStore& inner() { return *inner_; }

 private:
  void signer_loop();
  bool queued(const std::string& store_key) const;  // lock held

  std::shared_ptr<PrefixStore> inner_;
  EntrySigner signer_;
  const uint64_t max_queued_bytes_;
  std::atomic<int64_t> forged_{0};
  std::atomic<bool> logged_{false};

  mutable std::mutex mutex_;  // the queue
  std::condition_variable work_, idle_;
  std::deque<std::pair<std::string, std::string>> queue_;  // (store key, unsigned value), oldest first
  uint64_t queued_bytes_ = 0;
  bool signing_ = false, stop_ = false;
  int64_t dropped_ = 0, queue_hits_ = 0;
  std::thread thread_;
};

}  // namespace vlkv::server
