// What the HTTP layer (http_listener.h) hands the server's routes and takes back: a
// request read in full under the limits, a whole reply, and a writer for the reply or a
// chunked stream. Free of Boost so that only http_listener.cpp compiles Beast.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vlkv::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;          // "GET", "POST", ...
  std::string target;          // as sent: path and query
  std::string path;            // target up to '?'
  HeaderList headers;          // as sent, in order
  std::string body;            // empty while only the head has been read
  std::string remote_address;  // numeric

  // The first header of that name (ASCII case-insensitive), "" if absent.
  std::string header(std::string_view name) const;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;
  bool close = false;  // close the connection after this reply
};

// Writes one request's reply, on the worker thread that handles it. Every call is bounded
// in time (a client that stops reading is dropped); false means the client is gone.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual bool send(const HttpReply& reply) = 0;
  // A chunked reply (SSE): the head, then chunks, then the last chunk.
  virtual bool begin_stream(int status, const std::string& content_type, const HeaderList& headers) = 0;
  virtual bool write_chunk(std::string_view data) = 0;
  virtual bool end_stream() = 0;
  // True once the client closed or reset the connection (asked while nothing is written).
  virtual bool peer_closed() const = 0;
};

}  // namespace vlkv::server
