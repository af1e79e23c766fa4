#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

#include "server/client_connection.h"
#include "server/openai_response.h"
#include "server/request_channel.h"

namespace vlkv::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

bool answered(GenerationEnd end) {
  return end == GenerationEnd::kEndOfText || end == GenerationEnd::kLength || end == GenerationEnd::kStopped;
}

// A generation that produced no answer, as the client hears it.
ApiError error_for(const GenerationResult& r, int timeout_seconds, bool others_running) {
  switch (r.end) {
    case GenerationEnd::kCancelled: return unavailable("the request was cancelled: the server is shutting down");
    case GenerationEnd::kTimeout:
      return unavailable("the request timed out after " + std::to_string(timeout_seconds) + " s (--timeout)");
    default: break;
  }
  switch (r.status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidFile:
    case StatusCode::kUnsupported:
    case StatusCode::kNotFound:
      return bad_request(r.status.message());
    case StatusCode::kOutOfMemory:
      // Alone on the server it can never fit; beside other requests it may later.
      if (others_running) return unavailable(r.status.message() + " (the KV budget is in use; retry later)");
      return bad_request(r.status.message() + " (the request does not fit the KV budget)");
    default:
      return server_error(r.status.message());
  }
}

}  // namespace

HttpServer::HttpServer(HttpOptions options) : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  const int n_threads = std::max(4, options_.n_http_threads);
  http_->new_task_queue = [n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n_threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second server
  // bind the same port and silently take half its connections. The socket is kept to
  // widen httplib's listen backlog of 5 after binding (bind()).
  http_->set_socket_options([this](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_socket_ = sock;
  });
  add_routes();
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port <= 0)
    return Status(StatusCode::kIoError, "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                            " (address in use or not local?)");
  // 64 clients connecting at once overflow a backlog of 5: dropped SYNs cost a 1 s retry
  // and, when the handshake's last ACK is dropped, a lost request. listen() again resizes it.
  if (listen_socket_ >= 0) ::listen(listen_socket_, kListenBacklog);
  return port;
}

bool HttpServer::listen() {
  if (stopping_) return true;  // stop() came first (e.g. the model failed to load at once)
  return http_->listen_after_bind();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  stopping_ = true;
  const Clock::time_point until = Clock::now() + grace;
  while (active_streams_ > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // httplib's stop() does nothing before listening has begun: give the listener a moment.
  for (int i = 0; i < 200 && !http_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  http_->stop();
}

void HttpServer::send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.code;
  res.set_content(dump_json(error_json(e)), "application/json");
}

void HttpServer::add_routes() {
  httplib::Server& s = *http_;
  // Bearer auth on everything but /health (load balancers probe it without the key).
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path == "/health" || req.path == "/v1/health")
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    if (auth == "Bearer " + options_.api_key) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, unauthorized(auth.empty() ? "missing Authorization: Bearer <key> header" : "invalid API key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib produces itself (404, 413, a malformed request line) get the JSON shape.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
    if (res.status == 404) send_error(res, not_found_error("no such endpoint"));
    else if (res.status == 413)
      send_error(res, too_large("the request body exceeds --max-body (" + std::to_string(options_.max_body_bytes) + " bytes)"));
    else if (res.status >= 500) send_error(res, {res.status, "server_error", "HTTP error " + std::to_string(res.status)});
    else send_error(res, {res.status, "invalid_request_error", "HTTP error " + std::to_string(res.status)});
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, server_error(what));
  });

  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (!backend_) return send_error(res, unavailable("loading model"));
    res.set_content(R"({"status":"ok"})", "application/json");
  };
  s.Get("/health", health);
  s.Get("/v1/health", health);
  auto models = [this](const httplib::Request&, httplib::Response& res) {
    GenerationBackend* b = backend_;
    json m = {{"id", options_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "vlkv"}};
    if (b) {
      const Engine& e = b->model();
      m["meta"] = {{"n_ctx", e.params().n_ctx}, {"n_params_bytes", e.info().weight_bytes},
                   {"vision", e.has_vision()}, {"kv_methods", b->kv_methods()}};
    }
    res.set_content(dump_json({{"object", "list"}, {"data", json::array({m})}}), "application/json");
  };
  s.Get("/v1/models", models);
  s.Get("/models", models);
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    GenerationBackend* b = backend_;
    res.set_content(metrics_.prometheus(b ? b->load() : BackendLoad{}), "text/plain; version=0.0.4");
  });
  for (const char* path : {"/v1/chat/completions", "/chat/completions"})
    s.Post(path, [this](const httplib::Request& req, httplib::Response& res) { handle_generation(req, res, Endpoint::kChat); });
  for (const char* path : {"/v1/completions", "/completions"})
    s.Post(path, [this](const httplib::Request& req, httplib::Response& res) { handle_generation(req, res, Endpoint::kCompletion); });
}

void HttpServer::handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  GenerationBackend* backend = backend_;
  auto fail = [&](const ApiError& e) {
    metrics_.record_response(e.code);
    send_error(res, e);
  };
  if (!backend) return fail(unavailable("loading model"));
  if (stopping_) return fail(unavailable("the server is shutting down"));
  Result<ApiRequest> parsed = parse_request(req.body, endpoint, options_.limits);
  if (!parsed.is_ok()) return fail(bad_request(parsed.status().message()));
  ApiRequest& a = *parsed;
  const Engine& model = backend->model();
  if (!a.media.empty() && !model.has_vision())
    return fail(bad_request("this server's model is text-only: images need a model started with --mmproj"));
  const std::vector<std::string>& methods = backend->kv_methods();
  const std::string method = a.kv_method.empty() ? methods.front() : a.kv_method;
  if (std::find(methods.begin(), methods.end(), method) == methods.end()) {
    std::string allowed;
    for (const std::string& m : methods) allowed += (allowed.empty() ? "" : ", ") + m;
    return fail(bad_request("KV method '" + method + "' is not allowed on this server (--kv-allow: " + allowed + ")"));
  }

  // The prompt as vlkv run builds it: the model's chat template over the conversation
  // (one media marker per image, at its place); /v1/completions takes the text as given.
  // One user message is exactly Engine::user_prompt's case (vlkv run -p MESSAGE --image ...).
  GenerationRequest g;
  if (endpoint == Endpoint::kChat && a.conversation.size() == 1 && a.conversation[0].role == "user") {
    g.prompt = model.user_prompt(a.conversation[0].content, std::move(a.media), /*use_template=*/true);
  } else {
    g.prompt.text = endpoint == Endpoint::kChat ? model.apply_chat_template(a.conversation) : a.prompt;
    g.prompt.media = std::move(a.media);
  }
  g.params.sampling = a.sampling;
  const int64_t n_ctx = model.params().n_ctx;
  g.params.max_tokens = a.max_tokens < 0 ? n_ctx : std::min(a.max_tokens, n_ctx);
  g.kv_method = method;
  if (options_.timeout_seconds > 0) g.deadline = Clock::now() + std::chrono::seconds(options_.timeout_seconds);

  auto channel = std::make_shared<RequestChannel>(a.stop);
  GenerationCallbacks callbacks;
  callbacks.on_piece = [channel](const std::string& piece) { return channel->push(piece); };
  callbacks.on_done = [channel, this](const GenerationResult& r) {
    if (!r.kv.method.empty()) metrics_.record_generation(r);
    channel->finish(r);
  };
  const uint64_t id = backend->submit(std::move(g), std::move(callbacks));
  if (id == 0) return fail(stopping_ ? unavailable("the server is shutting down")
                                     : unavailable("the server is busy: the request queue is full (--max-queue)"));
  // While nothing is written the client's hang-up shows only on its socket: asked every
  // kHangUpPoll while queued, prefilled, and generating a non-streamed answer.
  const std::optional<ClientConnection> conn =
      ClientConnection::find(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  auto client_left = [&] {
    if (!conn || !conn->peer_closed()) return false;
    channel->abandon();
    backend->cancel(id);
    metrics_.record_disconnect();
    metrics_.record_response(499);  // nginx's "client closed request"
    send_error(res, {499, "invalid_request_error", "the client closed the connection"});  // nobody reads it
    return true;
  };
  // Until the first text the answer may still be an error with its own status.
  while (!channel->wait_started(kHangUpPoll))
    if (client_left()) return;
  const int timeout = options_.timeout_seconds;
  if (channel->done() && !channel->has_text() && !answered(channel->result().end))
    return fail(error_for(channel->result(), timeout, backend->load().running > 0));
  const ResponseIds ids = make_response_ids(endpoint, options_.model_name);

  if (!a.stream) {
    std::string text;
    while (!channel->wait_take(&text, kHangUpPoll))
      if (client_left()) return;
    const GenerationResult& r = channel->result();
    if (!answered(r.end)) return fail(error_for(r, timeout, backend->load().running > 0));
    metrics_.record_response(200);
    res.set_content(dump_json(completion_json(ids, text, r)), "application/json");
    return;
  }

  struct StreamState {
    bool first = true;
    bool finished = false;  // the last event was written: the client got it all
    bool ok = true;
    bool counted = false;   // its response was counted in the metrics
  };
  auto state = std::make_shared<StreamState>();
  const bool include_usage = a.include_usage;
  ++active_streams_;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx: pass events through at once
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, channel, state, ids, include_usage, timeout, backend](size_t, httplib::DataSink& sink) {
        std::string out;
        if (state->first && ids.endpoint == Endpoint::kChat) out = sse_event(text_chunk_json(ids, "", true, include_usage));
        std::string text;
        const bool done = channel->wait_take(&text, std::chrono::milliseconds(200));
        if (!text.empty()) out += sse_event(text_chunk_json(ids, text, false, include_usage));
        state->first = false;
        if (done) {
          const GenerationResult& r = channel->result();
          if (answered(r.end)) {
            out += sse_event(final_chunk_json(ids, r, include_usage));
            if (include_usage) out += sse_event(usage_chunk_json(ids, r));
          } else {
            state->ok = false;
            out += sse_event(error_json(error_for(r, timeout, backend->load().running > 0)));
          }
          out += sse_done();
          // Counted before the last bytes go out, so a client that has read [DONE] sees it in /metrics.
          state->counted = true;
          metrics_.record_response(state->ok ? 200 : 500);
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // client gone
        if (done) {
          state->finished = true;
          sink.done();
        }
        return true;
      },
      [this, channel, state, id, backend](bool) {
        if (!state->finished) {  // the client left (or the server stopped) mid-stream
          channel->abandon();
          backend->cancel(id);
          metrics_.record_disconnect();
        }
        if (!state->counted) metrics_.record_response(499);  // nginx's "client closed request"
        --active_streams_;
      });
}

}  // namespace vlkv::server
