#include "server/client_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <filesystem>

namespace vlkv::server {

namespace {

// addr as getnameinfo writes it numerically (httplib's own conversion), and its port.
bool numeric_address(const sockaddr_storage& addr, socklen_t len, std::string* host, int* port) {
  char h[NI_MAXHOST], s[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof h, s, sizeof s,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  *host = h;
  const std::string_view sv(s);
  return std::from_chars(sv.data(), sv.data() + sv.size(), *port).ec == std::errc();
}

bool socket_matches(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr,
                    int remote_port) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  std::string host;
  int port = -1;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || !numeric_address(addr, len, &host, &port) ||
      port != remote_port || host != remote_addr)
    return false;
  len = sizeof addr;
  return getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 && numeric_address(addr, len, &host, &port) &&
         port == local_port && host == local_addr;
}

}  // namespace

std::optional<ClientConnection> ClientConnection::find(const std::string& local_addr, int local_port,
                                                       const std::string& remote_addr, int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return std::nullopt;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    if (socket_matches(fd, local_addr, local_port, remote_addr, remote_port)) return ClientConnection(fd);
  }
  return std::nullopt;
}

bool ClientConnection::peer_closed() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;  // nothing to read, no hang-up
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace vlkv::server
