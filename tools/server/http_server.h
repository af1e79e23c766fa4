// The HTTP front of `vlkv serve` (cpp-httplib): OpenAI routes over a GenerationBackend,
// Bearer-key auth, JSON errors with llama-server's types, SSE streaming with cancel on
// disconnect, and /health and /metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "server/api_error.h"
#include "server/generation_backend.h"
#include "server/openai_request.h"
#include "server/server_metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace vlkv::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (bind() says which)
  std::string api_key;                   // "": no auth
  std::string model_name;                // the id in /v1/models and responses
  size_t max_body_bytes = 32u << 20;     // larger bodies → 413
  RequestLimits limits;
  int timeout_seconds = 600;             // per request, queued + generating; 0: none
  int n_http_threads = 64;               // connections served at once
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();

  // Binds host:port; the port bound (options.port 0: a free one), or a Status.
  Result<int> bind();
  // Serves until stop(); false if listening failed.
  bool listen();
  // The model is loaded: /health answers 200 and generations go to backend from now on
  // (503 "loading" until then). backend must outlive the server's last request.
  void set_backend(GenerationBackend* backend) { backend_ = backend; }
  // New generations get 503 from now on (the first step of a clean exit).
  void refuse_new() { stopping_ = true; }
  // Waits up to grace for streams still being written, then stops listening.
  void stop(std::chrono::milliseconds grace);

 private:
  void add_routes();
  void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void send_error(httplib::Response& res, const ApiError& e);
  std::atomic<GenerationBackend*> backend_{nullptr};
  HttpOptions options_;
  ServerMetrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_streams_{0};
  int listen_socket_ = -1;  // the bound socket (set by httplib's socket-options hook)
  static constexpr int kListenBacklog = 1024;
  static constexpr std::chrono::milliseconds kHangUpPoll{100};  // how often a waiting handler asks the socket
};

}  // namespace vlkv::server
