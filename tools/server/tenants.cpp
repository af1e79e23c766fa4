#include "server/tenants.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "engine/content_hash.h"

namespace vlkv::server {
namespace {

constexpr size_t kMaxKeyBytes = 512;
constexpr size_t kMaxTenantBytes = 64;
constexpr off_t kMaxFileBytes = 1 << 20;

std::string key_digest(const std::string& key) {
  Sha256 h;
  h.update_string("vlkv api key v1");
  h.update(key.data(), key.size());
  const std::array<uint8_t, 32> d = h.finish();
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool valid_tenant(const std::string& t) {
  return !t.empty() && t.size() <= kMaxTenantBytes && std::all_of(t.begin(), t.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

bool valid_key(const std::string& k) {
  return !k.empty() && k.size() <= kMaxKeyBytes &&
         std::all_of(k.begin(), k.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

}  // namespace

Status TenantKeys::add(const std::string& key, const std::string& tenant) {
  if (!valid_key(key))
    return invalid_argument("an API key must be 1-" + std::to_string(kMaxKeyBytes) +
                            " printable ASCII characters without spaces");
  if (!valid_tenant(tenant))
    return invalid_argument("tenant name '" + tenant.substr(0, kMaxTenantBytes) +
                            "': expected 1-64 characters of A-Z a-z 0-9 . _ -");
  if (!by_digest_.emplace(key_digest(key), tenant).second)
    return invalid_argument("an API key is given twice (tenant '" + tenant + "')");
  return Status::ok();
}

std::optional<std::string> TenantKeys::tenant_of(const std::string& authorization) const {
  static const std::string kBearer = "Bearer ";
  if (authorization.compare(0, kBearer.size(), kBearer) != 0) return std::nullopt;
  const std::string key = authorization.substr(kBearer.size());
  if (!valid_key(key)) return std::nullopt;
  auto it = by_digest_.find(key_digest(key));
  if (it == by_digest_.end()) return std::nullopt;
  return it->second;
}

size_t TenantKeys::n_tenants() const {
  std::set<std::string> names;
  for (const auto& [digest, tenant] : by_digest_) names.insert(tenant);
  return names.size();
}

Status load_api_keys_file(const std::string& path, TenantKeys& keys, std::string* warning) {
  const std::string what = "--api-keys " + path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return invalid_argument(what + ": cannot open it (a missing file or a symbolic link)");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return invalid_argument(what + ": not a regular file");
  }
  if (st.st_size > kMaxFileBytes) {
    close(fd);
    return invalid_argument(what + ": larger than 1 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  if (warning) {
    warning->clear();
    if (st.st_mode & (S_IROTH | S_IWOTH))
      *warning = what + " may be read by every user of this machine (chmod 600 it)";
  }
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  int n_keys = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream fields(line);
    std::string key, tenant, extra;
    if (!(fields >> key) || key[0] == '#') continue;
    if (!(fields >> tenant) || (fields >> extra))
      return invalid_argument(what + ", line " + std::to_string(number) + ": expected \"KEY TENANT\"");
    if (Status s = keys.add(key, tenant); !s.is_ok())
      return invalid_argument(what + ", line " + std::to_string(number) + ": " + s.message());
    ++n_keys;
  }
  if (n_keys == 0) return invalid_argument(what + ": no \"KEY TENANT\" line");
  return Status::ok();
}

std::string tenant_cache_salt(const std::string& tenant, const std::string& request_salt) {
  if (tenant.empty() && request_salt.empty()) return {};
  return std::to_string(tenant.size()) + ":" + tenant + request_salt;
}

}  // namespace vlkv::server
