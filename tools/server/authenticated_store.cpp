#include "server/authenticated_store.h"

#include "base/log.h"

namespace vlkv::server {

AuthenticatedStore::AuthenticatedStore(std::shared_ptr<PrefixStore> inner, std::string_view secret)
    : inner_(std::move(inner)), signer_(secret) {}

std::string AuthenticatedStore::store_key(const std::string& key) const {
  constexpr std::string_view kPrefix = "vlkv:prefix:";
  if (key.rfind(kPrefix, 0) == 0) return std::string(kPrefix) + signer_.id() + key.substr(kPrefix.size());
  return signer_.id() + ":" + key;
}

std::optional<std::string> AuthenticatedStore::get(const std::string& key) {
  const std::string k = store_key(key);
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
  return inner_->wants(store_key(key), bytes + kEnvelopeTrailerBytes);
}

void AuthenticatedStore::put(const std::string& key, std::string value) {
  const std::string k = store_key(key);
  signer_.seal(k, value);
  inner_->put(k, std::move(value));
}

void AuthenticatedStore::refused(const std::string& key) { inner_->refused(store_key(key)); }

PrefixStoreStats AuthenticatedStore::stats() const {
  PrefixStoreStats s = inner_->stats();
  const int64_t forged = forged_.load();
  s.forged = forged;  // the inner store counted them as hits (and refused)
  s.hits -= forged;
  s.misses += forged;
  return s;
}

}  // namespace vlkv::server
