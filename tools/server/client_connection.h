// Whether the client of a request being handled has hung up, asked while the request
// waits in the queue, is prefilled, or generates a non-streamed answer (a streamed one
// notices at its next write). cpp-httplib 0.11.4 gives a handler no socket and no
// "connection closed" query (later versions add Request::is_connection_closed), so the
// connection's socket is found among this process's descriptors by its address pair,
// which is unique while the handler runs (httplib closes the socket only after it).
#pragma once

#include <optional>
#include <string>

namespace vlkv::server {

class ClientConnection {
 public:
  // The socket whose local and peer addresses are these (numeric, as httplib reports
  // them), or nullopt when none is found (then peer_closed can never be asked).
  static std::optional<ClientConnection> find(const std::string& local_addr, int local_port,
                                              const std::string& remote_addr, int remote_port);

  // True once the peer closed or reset the connection: a read would see end of stream
  // or an error. Data the client sent ahead (a pipelined request) is not a hang-up.
  bool peer_closed() const;

  int fd() const { return fd_; }

 private:
  explicit ClientConnection(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace vlkv::server
