// The HTTP/1.1 transport of `vlkv serve` (Boost.Beast; see docs/http_layer.md for why):
// accepts connections, reads each request under limits that hold before any work (head
// bytes and count, head and body timeouts, body size in every transfer encoding, a
// connection cap per client address), refuses framing errors with 400 and closes, and
// hands each complete request to a worker thread. Pipelined requests are answered in order:
// a connection's next request is read only after its reply is written.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/http_message.h"
#include "vlkv/status.h"

namespace vlkv::server {

struct HttpLimits {
  uint32_t max_header_bytes = 64u << 10;  // request line + headers (nginx's 4 × 8k, rounded up)
  int max_header_count = 100;
  uint64_t max_body_bytes = 32u << 20;    // larger → 413, chunked or not
  std::chrono::seconds header_timeout{10};  // the whole head, from the first wait (idle keep-alive too)
  std::chrono::seconds body_timeout{60};    // the whole body
  std::chrono::seconds write_timeout{10};   // each write of a reply (a client that stops reading)
  int max_connections_per_address = 256;    // more from one address → 503 and closed
};

struct HttpHandlers {
  // On an I/O thread, once the head is read: a reply refuses the request before its body is
  // read (the connection is then closed); nullopt reads the body. Must not block.
  std::function<std::optional<HttpReply>(const HttpRequest& head)> admit;
  // On a worker thread, with the whole request. May block (a generation).
  std::function<void(const HttpRequest& request, ResponseWriter& writer)> handle;
  // A request refused by the transport itself (head null when none was read; status 408:
  // timed out, nothing can be sent): logs it and returns headers for the refusal (its
  // request id, CORS so that a web page can read the error).
  std::function<HeaderList(const HttpRequest* head, int status)> refused;
};

class HttpListener {
 public:
  HttpListener(HttpLimits limits, HttpHandlers handlers, int n_workers);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds host:port (0: a free one); the port bound.
  Result<int> bind(const std::string& host, int port);
  // Accepts and serves until stop(), on this thread and a few I/O threads.
  void run();
  // Stops accepting and reading, waits for running handlers, returns once run() may return.
  void stop();

  class Impl;  // defined in http_listener.cpp (its connections use it)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vlkv::server
