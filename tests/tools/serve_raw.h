// A raw TCP client for the server's transport tests: sends exactly the bytes a hostile or
// unusual client would (many headers, pipelined requests, broken framing) and reads what
// comes back, every step bounded in time. Also the server process's resident memory.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace vlkv::testing_serve {

class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  // All of data, or false once the server stopped taking it (closed, reset, or 5 s stalled).
  bool send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, 5000) <= 0) return false;
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // What arrives until the server closes the connection or timeout_ms passes; closed()
  // then says which.
  std::string read_all(int timeout_ms) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    char buf[65536];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) return out;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }
  // Reads until `count` whole replies with Content-Length bodies are in (or timeout).
  std::string read_replies(int count, int timeout_ms) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    char buf[65536];
    while (replies_in(out) < count) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  bool closed() const { return closed_; }

  // Whole replies (head + Content-Length body) at the start of data.
  static int replies_in(const std::string& data) {
    int n = 0;
    size_t at = 0;
    for (;;) {
      const size_t end = data.find("\r\n\r\n", at);
      if (end == std::string::npos) return n;
      const std::string head = data.substr(at, end - at);
      size_t len = 0;
      const size_t cl = head.find("Content-Length: ");
      if (cl != std::string::npos) len = std::strtoul(head.c_str() + cl + 16, nullptr, 10);
      if (data.size() < end + 4 + len) return n;
      at = end + 4 + len;
      ++n;
    }
  }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

// The status codes of the replies in data, in order ("HTTP/1.1 NNN" at each reply's start).
inline std::vector<int> reply_statuses(const std::string& data) {
  std::vector<int> codes;
  for (size_t at = data.find("HTTP/1.1 "); at != std::string::npos; at = data.find("HTTP/1.1 ", at + 1))
    codes.push_back(std::atoi(data.c_str() + at + 9));
  return codes;
}

// The process's resident set in bytes (VmRSS), 0 if unreadable.
inline uint64_t resident_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

}  // namespace vlkv::testing_serve
