#include "server/cache_secret.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vlkv::server {
namespace {

constexpr size_t kSecretBytes = 32, kMinBytes = 16, kMaxBytes = 4096;

std::string how_to_make(const std::string& path) {
  return " (make one with: head -c 32 /dev/urandom > " + path + " && chmod 600 " + path +
         "; every replica sharing a store needs the same file)";
}

Result<CacheSecret> create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return invalid_argument("--cache-secret-file " + path + ": cannot create it: " + std::strerror(errno));
  CacheSecret s;
  s.bytes.resize(kSecretBytes);
  bool ok = RAND_bytes(reinterpret_cast<unsigned char*>(s.bytes.data()), static_cast<int>(s.bytes.size())) == 1 &&
            ::write(fd, s.bytes.data(), s.bytes.size()) == static_cast<ssize_t>(s.bytes.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return invalid_argument("--cache-secret-file " + path + ": cannot write 32 random bytes to it");
  }
  s.created = true;
  return s;
}

}  // namespace

Result<CacheSecret> load_or_create_cache_secret(const std::string& path) {
  const std::string what = "--cache-secret-file " + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return create(path);
  if (fd < 0) return invalid_argument(what + ": cannot open it: " + std::strerror(errno) + how_to_make(path));
  struct stat st;
  std::string why;
  if (::fstat(fd, &st) != 0) why = std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) why = "not a regular file";
  else if (st.st_uid != ::geteuid() && st.st_uid != 0) why = "owned by another user";
  else if ((st.st_mode & (S_IWGRP | S_IWOTH | S_IROTH)) != 0) why = "readable or writable by others (chmod 600 or 640 it)";
  else if (st.st_size < static_cast<off_t>(kMinBytes) || st.st_size > static_cast<off_t>(kMaxBytes))
    why = "holds " + std::to_string(st.st_size) + " bytes, not 16..4096";
  CacheSecret s;
  if (why.empty()) {
    s.bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < s.bytes.size()) {
      const ssize_t n = ::read(fd, s.bytes.data() + got, s.bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != s.bytes.size()) why = "cannot read it";
  }
  ::close(fd);
  if (!why.empty()) return invalid_argument(what + ": " + why + how_to_make(path));
  return s;
}

}  // namespace vlkv::server
