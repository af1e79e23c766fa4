// vlkv serve --cache-secret-file: the deployment's secret that prefix-store entries (--redis,
// --cache-dir) are signed under (tools/server/authenticated_store.h). Replicas sharing a
// Redis share the file; whoever lacks it can neither plant an entry nor read one's key.
#pragma once

#include <string>

#include "vlkv/status.h"

namespace vlkv::server {

struct CacheSecret {
  std::string bytes;    // the file's content, whole
  bool created = false; // made now (the file was absent)
};

// The secret in the file at path. An absent file is created (O_EXCL, mode 0600) with 32
// random bytes. An existing one must be a regular file (not a link), owned by this user or
// root, neither writable by group or others nor readable by others, of 16..4096 bytes:
// otherwise a clear error that says how to make one.
Result<CacheSecret> load_or_create_cache_secret(const std::string& path);

}  // namespace vlkv::server
