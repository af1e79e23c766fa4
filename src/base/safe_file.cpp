#include "base/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace vlkv {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISDIR(m)) return "a folder";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a plain file";
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The process's umask without changing it (umask() would, racing other threads' creations).
mode_t current_umask() {
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned mask = 022;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "Umask: %o", &mask) == 1) break;
    std::fclose(f);
    return static_cast<mode_t>(mask & 0777);
  }
  return 022;
}

// An existing target must be a regular file: it is replaced, never written through.
Status check_target(const std::string& path, struct stat* st, bool* exists) {
  *exists = false;
  if (::lstat(path.c_str(), st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return io_error(path + ": cannot write (" + errno_text(errno) + ")");
  }
  *exists = true;
  if (!S_ISREG(st->st_mode))
    return invalid_argument(path + ": cannot write: it is " + kind_of(st->st_mode) +
                            ", not a regular file (give the path of a file to create or replace)");
  return Status::ok();
}

// A new empty file beside path (mkstemp: O_CREAT|O_EXCL, a name nobody else holds).
Result<std::pair<FileDescriptor, std::string>> make_temporary(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string tmp = folder_of(path) + "/." + base + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return io_error(path + ": cannot write (" + errno_text(errno) + " creating a file in " + folder_of(path) + ")");
  return std::pair{FileDescriptor(fd), std::move(tmp)};
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Result<RegularFile> open_regular_file(const std::string& path) {
  RegularFile f;
  f.fd = FileDescriptor(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (f.fd.get() < 0) return not_found(path + ": cannot open (" + errno_text(errno) + ")");
  struct stat st;
  if (::fstat(f.fd.get(), &st) != 0) return io_error(path + ": cannot stat (" + errno_text(errno) + ")");
  if (!S_ISREG(st.st_mode)) return invalid_argument(path + ": not a regular file (" + kind_of(st.st_mode) + ")");
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

Status read_exactly(const RegularFile& f, uint64_t offset, void* out, size_t n, const std::string& path) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(f.fd.get(), p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_error(path + ": read failed (" + errno_text(errno) + ")");
    if (got == 0) return io_error(path + ": read failed (the file got shorter while read)");
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return Status::ok();
}

Status check_writable_file(const std::string& path) {
  if (path.empty()) return invalid_argument("an empty output path");
  struct stat st;
  bool exists = false;
  VLKV_RETURN_IF_ERROR(check_target(path, &st, &exists));
  VLKV_ASSIGN_OR_RETURN(auto tmp, make_temporary(path));
  ::unlink(tmp.second.c_str());
  return Status::ok();
}

Status write_file_atomically(const std::string& path, std::string_view bytes) {
  if (path.empty()) return invalid_argument("an empty output path");
  struct stat st;
  bool exists = false;
  VLKV_RETURN_IF_ERROR(check_target(path, &st, &exists));
  VLKV_ASSIGN_OR_RETURN(auto tmp, make_temporary(path));
  const int fd = tmp.first.get();
  auto fail = [&](const std::string& what) {
    ::unlink(tmp.second.c_str());
    return io_error(path + ": " + what);
  };
  const mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~current_umask());
  if (::fchmod(fd, mode) != 0) return fail("cannot set the permissions (" + errno_text(errno) + ")");
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write failed (" + errno_text(n < 0 ? errno : ENOSPC) + ")");
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("write failed (" + errno_text(errno) + ")");
  if (::close(tmp.first.release()) != 0) return fail("write failed (" + errno_text(errno) + ")");
  if (::rename(tmp.second.c_str(), path.c_str()) != 0)
    return fail("cannot rename the written file into place (" + errno_text(errno) + ")");
  return Status::ok();
}

}  // namespace vlkv
