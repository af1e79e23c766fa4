// Whether the client of a request being handled has hung up, asked on its socket while
// the request waits in the queue, is prefilled, or generates a non-streamed answer (a
// streamed one notices at its next write).
#pragma once

namespace vlkv::server {

class ClientConnection {
 public:
  explicit ClientConnection(int fd) : fd_(fd) {}

  // True once the peer closed or reset the connection: a read would see end of stream
  // or an error. Data the client sent ahead (a pipelined request) is not a hang-up.
  bool peer_closed() const;

  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace vlkv::server
