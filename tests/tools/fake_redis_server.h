// A Redis stand-in on loopback for tests of vlkv serve's Redis client: each connection is
// handed to a behaviour (answer nothing, trickle bytes, send a huge value...) on a thread of
// its own. The server and its connections stop when it is destroyed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace vlkv::testing_redis {

class FakeRedis {
 public:
  // behaviour(fd, stop): serves one connection; returns when done or when stop is set.
  using Behaviour = std::function<void(int fd, const std::atomic<bool>& stop)>;
  explicit FakeRedis(Behaviour behaviour) : behaviour_(std::move(behaviour)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~FakeRedis() {
    stop_ = true;
    accept_thread_.join();
    for (std::thread& t : connections_) t.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  int connections() const { return accepted_.load(); }

  // Reads what the client sent until a whole command's worth ends in CRLF (or stop): tests
  // only need to know a command arrived.
  static bool read_command(int fd, const std::atomic<bool>& stop) {
    char buf[4096];
    while (!stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      if (n >= 2 && buf[n - 2] == '\r' && buf[n - 1] == '\n') return true;
    }
    return false;
  }
  // Sends bytes (false once the client is gone or stop is set).
  static bool send_bytes(int fd, const std::string& bytes, const std::atomic<bool>& stop, uint64_t* sent = nullptr) {
    size_t at = 0;
    while (at < bytes.size() && !stop) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
      if (sent) *sent += static_cast<uint64_t>(n);
    }
    return at == bytes.size();
  }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      ++accepted_;
      connections_.emplace_back([this, fd] {
        behaviour_(fd, stop_);
        ::close(fd);
      });
    }
  }
  Behaviour behaviour_;
  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread accept_thread_;
  std::vector<std::thread> connections_;  // only the accept thread adds, joined after it ends
};

}  // namespace vlkv::testing_redis
