// The routes of `vlkv serve` over the HTTP transport (http_listener.h): OpenAI routes over
// a GenerationBackend, Bearer-key auth checked from the head (before the body is read),
// CORS, x-request-id, JSON errors with llama-server's types, SSE streaming with cancel on
// disconnect, llama-server's /props, /tokenize and /detokenize, /health and /metrics, and
// one log line per request, and the chat page at / (web_page.h).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/generation_backend.h"
#include "server/http_listener.h"
#include "server/openai_request.h"
#include "server/request_log.h"
#include "server/server_info.h"
#include "server/server_metrics.h"
#include "server/slot_table.h"
#include "server/tenants.h"

namespace vlkv::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (bind() says which)
  TenantKeys keys;                       // --api-key / --api-keys (none: no auth, one tenant "")
  std::string admin_tenant;              // sees every tenant's /slots and the whole /metrics ("": none)
  // Host header values (host part, any port) a request may carry besides localhost,
  // 127.0.0.1, [::1] and `host`: checked when `host` is a loopback address or this list is
  // not empty (DNS rebinding: a web page whose name resolves to 127.0.0.1). "*": any.
  std::vector<std::string> allowed_hosts;
  std::string model_name;                // the id in /v1/models and responses
  std::string model_path;                // for /props
  int n_slots = 0;                       // for /props
  std::string cors_origin;               // "": no CORS headers; "*": any origin; else that origin only
  HttpLimits transport;                  // head, body, timeouts, connections per address
  RequestLimits limits;
  int timeout_seconds = 600;             // per request, queued + generating; 0: none
  int n_http_threads = 64;               // requests handled at once (a generation holds one)
};

// Whether an address to listen on is this machine's alone: localhost, 127.0.0.0/8, ::1.
bool is_loopback_host(const std::string& host);

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();

  // Binds host:port; the port bound (options.port 0: a free one), or a Status.
  Result<int> bind();
  // Serves until stop().
  bool listen();
  // The model is loaded: /health answers 200 and generations go to backend from now on
  // (503 "loading" until then). backend must outlive the server's last request.
  void set_backend(GenerationBackend* backend) { backend_ = backend; }
  // New generations get 503 from now on (the first step of a clean exit).
  void refuse_new() { stopping_ = true; }
  // Waits up to grace for streams still being written, then stops listening.
  void stop(std::chrono::milliseconds grace);

 private:
  struct Exchange;  // one request being answered

  std::optional<HttpReply> admit(const HttpRequest& head);
  void handle(const HttpRequest& req, ResponseWriter& w);
  void handle_generation(const HttpRequest& req, ResponseWriter& w, Exchange& x, Endpoint endpoint);
  void reply_json(ResponseWriter& w, Exchange& x, int status, const nlohmann::json& body);
  void reply_error(ResponseWriter& w, Exchange& x, const ApiError& e);
  HeaderList cors_headers(const HttpRequest& req) const;
  std::string request_id(const HttpRequest& req);
  // The tenant whose key the request carries ("" without auth or a valid key).
  std::string tenant_of(const HttpRequest& req) const;
  // Whether tenant sees only its own requests in /slots and /metrics.
  bool isolated(const std::string& tenant) const;
  bool host_allowed(const HttpRequest& head) const;

  std::atomic<GenerationBackend*> backend_{nullptr};
  HttpOptions options_;
  ServedModel served_;
  ServerMetrics metrics_;
  SlotTable slots_;  // GET /slots
  std::unique_ptr<HttpListener> listener_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_streams_{0};
  std::atomic<uint64_t> n_requests_{0};
  uint64_t id_salt_ = 0;  // random per process: request ids differ across restarts
  static constexpr std::chrono::milliseconds kHangUpPoll{100};  // how often a waiting handler asks the socket
  static constexpr size_t kMaxRequestIdBytes = 128;             // a longer x-request-id is replaced
};

}  // namespace vlkv::server
