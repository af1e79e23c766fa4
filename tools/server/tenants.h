// API keys and the tenants they name (vlkv serve --api-key, --api-keys FILE). A tenant is the
// unit of isolation: its requests' cache keys are salted by its name (tenant_cache_salt), so
// one tenant's prompts and images never hit, replace or time another's entries, and /slots
// and /metrics show it only its own requests. Keys are kept as SHA-256 digests: looking one up
// compares digests, never the secret byte by byte.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "vlkv/status.h"

namespace vlkv::server {

class TenantKeys {
 public:
  // Adds key for tenant. InvalidArgument for an empty key or one with spaces or control
  // characters, a tenant name outside [A-Za-z0-9._-]{1,64}, or a key added before.
  Status add(const std::string& key, const std::string& tenant);
  // The tenant of an Authorization header's value ("Bearer KEY"), or nothing.
  std::optional<std::string> tenant_of(const std::string& authorization) const;
  bool empty() const { return by_digest_.empty(); }
  // Distinct tenant names.
  size_t n_tenants() const;

 private:
  std::map<std::string, std::string> by_digest_;  // SHA-256 (hex) of a key -> its tenant
};

// Reads an --api-keys file into keys: one "KEY TENANT" per line (blank lines and lines
// starting with '#' ignored; several keys may name one tenant). The file must be a regular
// file of at most 1 MiB; *warning says so when other users may read it.
Status load_api_keys_file(const std::string& path, TenantKeys& keys, std::string* warning);

// What a request's Prompt::cache_salt is: its tenant and its own "cache_salt" field, length-
// prefixed so that no other (tenant, salt) pair gives the same string. "" for ("", "").
std::string tenant_cache_salt(const std::string& tenant, const std::string& request_salt);

}  // namespace vlkv::server
