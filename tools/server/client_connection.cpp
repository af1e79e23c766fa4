#include "server/client_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace vlkv::server {

bool ClientConnection::peer_closed() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;  // nothing to read, no hang-up
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace vlkv::server
