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

Result<AtomicFile> AtomicFile::create(const std::string& path) {
  if (path.empty()) return invalid_argument("an empty output path");
  struct stat st;
  bool exists = false;
  VLKV_RETURN_IF_ERROR(check_target(path, &st, &exists));
  VLKV_ASSIGN_OR_RETURN(auto tmp, make_temporary(path));
  AtomicFile f(path, std::move(tmp.first), std::move(tmp.second));
  const mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~current_umask());
  if (::fchmod(f.fd_.get(), mode) != 0) return f.fail("cannot set the permissions (" + errno_text(errno) + ")");
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::move(o.fd_)), tmp_(std::exchange(o.tmp_, std::string())) {}

AtomicFile::~AtomicFile() {
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Status AtomicFile::fail(const std::string& what) {
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  fd_ = FileDescriptor();
  return io_error(path_ + ": " + what);
}

Status AtomicFile::write(const void* data, size_t n) {
  if (tmp_.empty()) return io_error(path_ + ": written after it was closed");
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_.get(), p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail("write failed (" + errno_text(w < 0 ? errno : ENOSPC) + ")");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

Status AtomicFile::write_at(uint64_t offset, const void* data, size_t n) {
  if (tmp_.empty()) return io_error(path_ + ": written after it was closed");
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_.get(), p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail("write failed (" + errno_text(w < 0 ? errno : ENOSPC) + ")");
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::ok();
}

Status AtomicFile::commit() {
  if (tmp_.empty()) return io_error(path_ + ": committed after it was closed");
  if (::fsync(fd_.get()) != 0) return fail("write failed (" + errno_text(errno) + ")");
  if (::close(fd_.release()) != 0) return fail("write failed (" + errno_text(errno) + ")");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    return fail("cannot rename the written file into place (" + errno_text(errno) + ")");
  tmp_.clear();
  return Status::ok();
}

Status write_file_atomically(const std::string& path, std::string_view bytes) {
  VLKV_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path));
  VLKV_RETURN_IF_ERROR(f.write(bytes.data(), bytes.size()));
  return f.commit();
}

}  // namespace vlkv
