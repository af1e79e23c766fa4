// Files named by a user or a request, opened so that what sits at the path cannot turn a read
// or a write into something else: reads take regular files only (a FIFO would block forever, a
// device would stream without end), writes go to a fresh temporary beside the target (mkstemp:
// never a file someone planted there) that is synced and renamed over it, and a target that is
// not a regular file (/dev/full, a symbolic link, a folder) is refused and left untouched.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "vlkv/status.h"

namespace vlkv {

// An open file descriptor, closed on destruction.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& o) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

struct RegularFile {
  FileDescriptor fd;
  uint64_t size = 0;  // from fstat, at open
};

// Opens path for reading without blocking on what it is (O_NONBLOCK), then refuses anything but
// a regular file (a symbolic link to one is fine): "PATH: not a regular file (a FIFO)".
Result<RegularFile> open_regular_file(const std::string& path);

// Reads exactly n bytes at offset; IoError when the file ends first.
Status read_exactly(const RegularFile& f, uint64_t offset, void* out, size_t n, const std::string& path);

// Whether write_file_atomically(path, ...) can succeed, checked cheaply before the work that
// produces the bytes: the target is absent or a regular file, and a file can be created in
// its folder. "PATH: cannot write (...)" otherwise.
Status check_writable_file(const std::string& path);

// A file that replaces path only once it is whole: written to a new temporary in path's folder
// (mkstemp), then synced and renamed over path by commit(), so a reader sees the old file or
// the whole new one. It takes the old file's permissions, or 0666 less the umask. Dropped
// without commit() (an error, an early return), the temporary is removed: nothing is left behind.
class AtomicFile {
 public:
  static Result<AtomicFile> create(const std::string& path);
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  ~AtomicFile();

  Status write(const void* data, size_t n);                    // at the end
  Status write_at(uint64_t offset, const void* data, size_t n);  // over bytes already written
  Status commit();

 private:
  AtomicFile(std::string path, FileDescriptor fd, std::string tmp)
      : path_(std::move(path)), fd_(std::move(fd)), tmp_(std::move(tmp)) {}
  Status fail(const std::string& what);
  std::string path_;
  FileDescriptor fd_;
  std::string tmp_;  // "" once committed or removed
};

// The whole of bytes as an AtomicFile.
Status write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace vlkv
