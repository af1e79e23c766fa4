// A PrefixStore that signs what it puts and verifies what it gets (entry_envelope.h), around
// the store that holds the bytes (Redis, a directory): whoever can write to that store but
// lacks the deployment's secret cannot plant an entry. A value whose MAC fails is a miss,
// counted (stats().forged, also in refused), logged once, handed to the inner store's
// refused() (a directory deletes it) and never parsed. Keys carry the secret's id, so
// deployments with different secrets sharing one store never meet.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "server/entry_envelope.h"
#include "vlkv/prefix_store.h"

namespace vlkv::server {

class AuthenticatedStore : public PrefixStore {
 public:
  AuthenticatedStore(std::shared_ptr<PrefixStore> inner, std::string_view secret);

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
  std::shared_ptr<PrefixStore> inner_;
  EntrySigner signer_;
  std::atomic<int64_t> forged_{0};
  std::atomic<bool> logged_{false};
};

}  // namespace vlkv::server
