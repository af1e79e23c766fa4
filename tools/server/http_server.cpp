#include "server/http_server.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <functional>
#include <random>
#include <thread>

#include "server/chat_prompt.h"
#include "server/logprobs_json.h"
#include "server/openai_response.h"
#include "server/request_channel.h"
#include "server/sampling_hook.h"
#include "server/web_page.h"

namespace vlkv::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct HttpServer::Exchange {
  RequestLog log;
  HeaderList headers;  // on every reply: x-request-id and the CORS headers
};

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

enum class Route { kNone, kPage, kHealth, kModels, kModel, kMetrics, kProps, kSlots, kTokenize, kDetokenize, kChat, kCompletion };

constexpr const char* kModelsPrefix[] = {"/v1/models/", "/models/"};

Route route_of(const std::string& path) {
  if (path == "/health" || path == "/v1/health") return Route::kHealth;
  if (path == "/v1/models" || path == "/models") return Route::kModels;
  for (const char* p : kModelsPrefix)
    if (path.rfind(p, 0) == 0 && path.size() > std::char_traits<char>::length(p)) return Route::kModel;
  if (path == "/metrics") return Route::kMetrics;
  if (find_web_asset(path)) return Route::kPage;
  if (path == "/props") return Route::kProps;
  if (path == "/slots") return Route::kSlots;
  if (path == "/tokenize") return Route::kTokenize;
  if (path == "/detokenize") return Route::kDetokenize;
  if (path == "/v1/chat/completions" || path == "/chat/completions") return Route::kChat;
  if (path == "/v1/completions" || path == "/completions") return Route::kCompletion;
  return Route::kNone;
}

const char* method_of(Route r) {
  switch (r) {
    case Route::kTokenize:
    case Route::kDetokenize:
    case Route::kChat:
    case Route::kCompletion: return "POST";
    default: return "GET";
  }
}

// A client's x-request-id is echoed when it is short printable ASCII.
bool usable_request_id(const std::string& id, size_t max_bytes) {
  if (id.empty() || id.size() > max_bytes) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

HttpServer::HttpServer(HttpOptions options) : options_(std::move(options)) {
  served_ = {options_.model_name, options_.model_path, static_cast<int64_t>(std::time(nullptr)), options_.n_slots};
  served_.api_key_required = !options_.keys.empty();
  id_salt_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  HttpHandlers h;
  h.admit = [this](const HttpRequest& head) { return admit(head); };
  h.handle = [this](const HttpRequest& req, ResponseWriter& w) { handle(req, w); };
  h.refused = [this](const HttpRequest* head, int status) {
    const std::string none(1, '-');  // (not a literal assignment: GCC 12's false -Wrestrict, bug 105329)
    RequestLog log;
    log.id = head ? request_id(*head) : none;
    log.method = head ? head->method : none;
    log.path = head ? head->path : none;
    log.status = status;
    write_request_log(log);
    HeaderList headers = head ? cors_headers(*head) : HeaderList{};
    if (head) headers.emplace_back("x-request-id", log.id);
    return headers;
  };
  listener_ = std::make_unique<HttpListener>(options_.transport, std::move(h), std::max(4, options_.n_http_threads));
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() { return listener_->bind(options_.host, options_.port); }

bool HttpServer::listen() {
  listener_->run();
  return true;
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  stopping_ = true;
  const Clock::time_point until = Clock::now() + grace;
  while (active_streams_ > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  listener_->stop();
}

std::string HttpServer::request_id(const HttpRequest& req) {
  const std::string given = req.header("X-Request-Id");
  if (usable_request_id(given, kMaxRequestIdBytes)) return given;
  char buf[40];
  std::snprintf(buf, sizeof buf, "req-%016llx", static_cast<unsigned long long>(id_salt_ + n_requests_++ * 0x9e3779b97f4a7c15ull));
  return buf;
}

HeaderList HttpServer::cors_headers(const HttpRequest& req) const {
  const std::string origin = req.header("Origin");
  if (options_.cors_origin.empty() || origin.empty()) return {};
  if (options_.cors_origin != "*" && origin != options_.cors_origin) return {};
  HeaderList h = {{"Access-Control-Allow-Origin", options_.cors_origin == "*" ? "*" : origin},
                  {"Access-Control-Expose-Headers", "x-request-id"}};
  if (options_.cors_origin != "*") h.emplace_back("Vary", "Origin");
  return h;
}

void HttpServer::reply_json(ResponseWriter& w, Exchange& x, int status, const json& body) {
  x.log.status = status;
  w.send({status, "application/json", dump_json(body), x.headers, false});
}

void HttpServer::reply_error(ResponseWriter& w, Exchange& x, const ApiError& e) { reply_json(w, x, e.code, error_json(e)); }

std::string HttpServer::tenant_of(const HttpRequest& req) const {
  if (options_.keys.empty()) return {};
  return options_.keys.tenant_of(req.header("Authorization")).value_or(std::string());
}

bool HttpServer::isolated(const std::string& tenant) const {
  return options_.keys.n_tenants() > 1 && (options_.admin_tenant.empty() || tenant != options_.admin_tenant);
}

// The Host header's name (port and one trailing dot dropped, lower case) against the names
// this server answers to. A request without Host (HTTP/1.0) passes: a browser always sends one.
bool HttpServer::host_allowed(const HttpRequest& head) const {
  const bool loopback = is_loopback_host(options_.host);
  if (!loopback && options_.allowed_hosts.empty()) return true;
  std::string host = head.header("Host");
  if (host.empty()) return true;
  if (host[0] == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else if (const size_t colon = host.find(':'); colon != std::string::npos) {
    host.resize(colon);
  }
  if (!host.empty() && host.back() == '.') host.pop_back();
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) { return std::tolower(c); });
  auto same = [&](std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    return name == "*" || name == host || "[" + name + "]" == host;
  };
  for (const char* name : {"localhost", "127.0.0.1", "::1"})
    if (same(name)) return true;
  if (same(options_.host)) return true;
  return std::any_of(options_.allowed_hosts.begin(), options_.allowed_hosts.end(), same);
}

// From the head alone: unknown routes, a Host this server does not answer to and a missing
// or wrong key are refused before the body is read (the connection is then closed, so a
// body can never run as a request).
std::optional<HttpReply> HttpServer::admit(const HttpRequest& head) {
  std::optional<ApiError> refusal;
  const Route route = route_of(head.path);
  if (!host_allowed(head)) {
    refusal = ApiError{403, "invalid_request_error",
                       "Host header not allowed: this server answers to localhost and --allowed-hosts names only"};
  } else if (head.method == "OPTIONS") {
    return std::nullopt;  // CORS preflight: never needs the key
  } else if (route == Route::kNone) {
    refusal = not_found_error("no such endpoint");
  } else if (!options_.keys.empty() && route != Route::kHealth && route != Route::kPage) {
    const std::string auth = head.header("Authorization");
    if (!options_.keys.tenant_of(auth))
      refusal = unauthorized(auth.empty() ? "missing Authorization: Bearer <key> header" : "invalid API key");
  }
  if (!refusal) return std::nullopt;
  RequestLog log;
  log.id = request_id(head);
  log.method = head.method;
  log.path = head.path;
  log.status = refusal->code;
  write_request_log(log);
  HeaderList headers = cors_headers(head);
  headers.emplace_back("x-request-id", log.id);
  if (refusal->code == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  return HttpReply{refusal->code, "application/json", dump_json(error_json(*refusal)), std::move(headers), true};
}

void HttpServer::handle(const HttpRequest& req, ResponseWriter& w) {
  Exchange x;
  x.log.id = request_id(req);
  x.log.method = req.method;
  x.log.path = req.path;
  x.headers = cors_headers(req);
  x.headers.emplace_back("x-request-id", x.log.id);
  const Route route = route_of(req.path);
  GenerationBackend* b = backend_;

  if (req.method == "OPTIONS") {  // CORS preflight (answered without CORS headers when --cors-origin is off)
    HeaderList h = x.headers;
    h.emplace_back("Allow", "GET, HEAD, POST, OPTIONS");
    if (!cors_headers(req).empty()) {
      h.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
      const std::string asked = req.header("Access-Control-Request-Headers");
      h.emplace_back("Access-Control-Allow-Headers",
                     asked.empty() || asked.size() > 1024 ? "Authorization, Content-Type, X-Request-Id" : asked);
      h.emplace_back("Access-Control-Max-Age", "600");
    }
    x.log.status = 204;
    w.send({204, "text/plain", "", std::move(h), false});
  } else if (req.method != method_of(route) && !(req.method == "HEAD" && method_of(route) == std::string("GET"))) {
    // HEAD is a GET whose body the listener leaves out (RFC 9110 9.3.2).
    HeaderList h = x.headers;
    h.emplace_back("Allow", method_of(route) == std::string("GET") ? "GET, HEAD, OPTIONS" : "POST, OPTIONS");
    x.log.status = 405;
    const ApiError e{405, "invalid_request_error", req.method + " is not allowed on " + req.path};
    w.send({405, "application/json", dump_json(error_json(e)), std::move(h), false});
  } else if (route == Route::kPage) {
    // The page's own files: no key (its API calls carry the one the user types), and a
    // policy that lets it load nothing but itself and talk only to this server.
    const WebAsset* page = find_web_asset(req.path);
    HeaderList h = x.headers;
    h.emplace_back("Cache-Control", "no-cache");
    h.emplace_back("X-Content-Type-Options", "nosniff");
    h.emplace_back("Referrer-Policy", "no-referrer");
    h.emplace_back("Content-Security-Policy",
                   "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src data:; "
                   "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    x.log.status = 200;
    w.send({200, std::string(page->content_type), std::string(page->body), std::move(h), false});
  } else if (route == Route::kHealth) {
    if (!b) reply_error(w, x, unavailable("loading model"));
    else reply_json(w, x, 200, {{"status", "ok"}});
  } else if (route == Route::kModels) {
    reply_json(w, x, 200, {{"object", "list"}, {"data", json::array({model_json(served_, b)})}});
  } else if (route == Route::kModel) {
    std::string id = req.path;
    for (const char* p : kModelsPrefix)
      if (id.rfind(p, 0) == 0) {
        id.erase(0, std::char_traits<char>::length(p));
        break;
      }
    if (id != served_.id) reply_error(w, x, not_found_error("model '" + id + "' is not served here (" + served_.id + " is)"));
    else reply_json(w, x, 200, model_json(served_, b));
  } else if (route == Route::kMetrics) {
    x.log.status = 200;
    const std::string tenant = tenant_of(req);
    w.send({200, "text/plain; version=0.0.4",
            isolated(tenant) ? metrics_.prometheus_of(tenant) : metrics_.prometheus(b ? b->load() : BackendLoad{}),
            x.headers, false});
  } else if (!b) {
    reply_error(w, x, unavailable("loading model"));
  } else if (route == Route::kProps) {
    reply_json(w, x, 200, props_json(served_, *b));
  } else if (route == Route::kSlots) {
    const std::string tenant = tenant_of(req);
    reply_json(w, x, 200, slots_.to_json(served_.n_slots, b->load().running, b->model().params().n_ctx,
                                         isolated(tenant) ? &tenant : nullptr));
  } else if (route == Route::kTokenize || route == Route::kDetokenize) {
    Result<json> r = route == Route::kTokenize ? tokenize_json(req.body, b->model()) : detokenize_json(req.body, b->model());
    if (!r.is_ok()) reply_error(w, x, bad_request(r.status().message()));
    else reply_json(w, x, 200, *r);
  } else {
    handle_generation(req, w, x, route == Route::kChat ? Endpoint::kChat : Endpoint::kCompletion);
  }
  write_request_log(x.log);
}

void HttpServer::handle_generation(const HttpRequest& req, ResponseWriter& w, Exchange& x, Endpoint endpoint) {
  GenerationBackend* backend = backend_;
  const std::string tenant = tenant_of(req);
  auto fail = [&](const ApiError& e) {
    metrics_.record_response(e.code, tenant);
    reply_error(w, x, e);
  };
  if (stopping_) return fail(unavailable("the server is shutting down"));
  Result<ApiRequest> parsed = parse_request(req.body, endpoint, options_.limits);
  if (!parsed.is_ok()) return fail(bad_request(parsed.status().message()));
  ApiRequest& a = *parsed;
  const Engine& model = backend->model();
  if (!a.images.empty() && !model.has_vision())
    return fail(bad_request("this server's model is text-only: images need a model started with --mmproj"));
  const std::vector<std::string>& methods = backend->kv_methods();
  const std::string method = a.kv_method.empty() ? methods.front() : a.kv_method;
  if (std::find(methods.begin(), methods.end(), method) == methods.end()) {
    std::string allowed;
    for (const std::string& m : methods) allowed += (allowed.empty() ? "" : ", ") + m;
    return fail(bad_request("KV method '" + method + "' is not allowed on this server (--kv-allow: " + allowed + ")"));
  }
  x.log.kv_method = method;

  // The prompt as vlkv run builds it: the model's chat template over the conversation
  // (one media marker per image, at its place); /v1/completions takes the text as given.
  // One user message is exactly Engine::user_prompt's case (vlkv run -p MESSAGE --image ...).
  // A chat message's text is the client's: no special tokens, no media markers in it
  // (chat_prompt.h). /v1/completions' prompt is raw: its client writes the template's markers.
  GenerationRequest g;
  if (endpoint == Endpoint::kChat) {
    Result<ChatPromptText> chat = chat_prompt_text(model, a.conversation, a.media_at, a.images.size());
    if (!chat.is_ok()) return fail(server_error(chat.status().message()));
    g.prompt.text = std::move(chat->text);
    g.prompt.plain_spans = std::move(chat->plain_spans);
  } else {
    g.prompt.text = a.prompt;
  }
  // The prompt's size from the images' headers, before any pixel is decoded: a prompt the
  // context or the KV budget cannot hold is refused here, in milliseconds (issue 24's probe:
  // 8 small PNGs that decode to 8192 x 8192 each).
  if (!a.images.empty()) {
    std::vector<MediaInfo> headers;
    for (const RequestImage& img : a.images) headers.push_back(img.info);
    Result<PromptTokenCount> count = model.count_prompt_tokens(g.prompt.text, headers, /*add_bos=*/true, g.prompt.plain_spans);
    if (!count.is_ok()) return fail(bad_request(count.status().message()));
    const std::string what = std::to_string(a.images.size()) + " image/video input(s): " +
                             std::to_string(count->n_visual_tokens) + " visual tokens, counted from their headers before decoding";
    // One generated token at least, as the backends admit; the Scheduler's fuller KV
    // reservation (prompt + max_tokens) is checked again at admission.
    if (Status st = model.check_prompt_fits(count->n_tokens, 1, method, what); !st.is_ok())
      return fail(bad_request(st.message()));
    for (size_t i = 0; i < a.images.size(); ++i) {
      Result<MediaItem> item = decode_request_media(a.images[i], options_.limits);
      if (!item.is_ok())
        return fail(bad_request((a.images[i].is_video ? "video " : "image ") + std::to_string(i + 1) + ": " +
                                item.status().message()));
      a.images[i] = RequestImage{};  // its bytes (or temp file) are not needed once decoded
      g.prompt.media.push_back(std::move(item).value());
    }
  }
  g.params.sampling = a.sampling;
  const int64_t n_ctx = model.params().n_ctx;
  g.params.max_tokens = a.max_tokens < 0 ? n_ctx : std::min(a.max_tokens, n_ctx);
  g.kv_method = method;
  // Cache keys salted by tenant and the request's cache_salt: another tenant's prompt never
  // hits, replaces or times this one's cache entries (tenants.h).
  g.prompt.cache_salt = tenant_cache_salt(tenant, a.cache_salt);
  g.cache_owner = std::hash<std::string>{}(tenant);
  if (options_.timeout_seconds > 0) g.deadline = Clock::now() + std::chrono::seconds(options_.timeout_seconds);

  // logprobs and response_format: the request's hook on the step's logits.
  std::shared_ptr<SamplingHook> hook;
  if (a.logprobs >= 0 || a.response_format)
    hook = std::make_shared<SamplingHook>(a.logprobs, a.response_format,
                                          a.response_format ? token_table_for(model) : nullptr);
  g.params.logits_processor = hook;
  const json slot_params = {{"n_predict", g.params.max_tokens}, {"temperature", a.sampling.temperature},
                            {"top_k", a.sampling.top_k}, {"top_p", a.sampling.top_p}, {"min_p", a.sampling.min_p},
                            {"repeat_penalty", a.sampling.repeat_penalty}, {"seed", a.sampling.seed},
                            {"stop", a.stop}, {"stream", a.stream}, {"kv", method}, {"n_probs", std::max(0, a.logprobs)},
                            {"response_format", a.response_format ? "json" : "text"}};
  std::shared_ptr<SlotTable::Entry> slot = slots_.add(x.log.id, slot_params, g.params.max_tokens, tenant);
  auto channel = std::make_shared<RequestChannel>(a.stop);
  GenerationCallbacks callbacks;
  callbacks.on_piece = [channel, hook, slot](const std::string& piece) {
    ++slot->n_decoded;
    if (hook && hook->wants_logprobs()) channel->add_logprobs(hook->take_logprobs());
    // A whole JSON document (response_format) ends the answer: nothing may follow it.
    return channel->push(piece) && !(hook && hook->document_finished());
  };
  callbacks.on_done = [channel, hook, slot, tenant, this](const GenerationResult& result) {
    slots_.forget(slot);
    GenerationResult r = result;
    if (hook && hook->dead_end() && answered(r.end)) {
      r.end = GenerationEnd::kError;
      r.status = Status(StatusCode::kInternal,
                        "response_format: no token of the model's vocabulary continues the JSON document");
    }
    if (!r.kv.method.empty()) metrics_.record_generation(r, tenant);
    channel->finish(r);
  };
  const uint64_t id = backend->submit(std::move(g), std::move(callbacks));
  if (id == 0) slots_.forget(slot);
  if (id == 0) return fail(stopping_ ? unavailable("the server is shutting down")
                                     : unavailable("the server is busy: the request queue is full (--max-queue)"));
  // The figures of the log line, once the generation is done.
  auto note_result = [&](const GenerationResult& r) {
    x.log.prompt_tokens = r.stats.n_prompt_tokens;
    x.log.generated_tokens = r.stats.n_generated;
    x.log.tokens_per_second = r.stats.decode_seconds > 0 ? r.stats.n_generated / r.stats.decode_seconds : 0;
    x.log.kv_bytes = static_cast<double>(r.kv.held_bytes);
  };
  // While nothing is written the client's hang-up shows only on its socket: asked every
  // kHangUpPoll while queued, prefilled, and generating a non-streamed answer.
  auto client_left = [&] {
    if (!w.peer_closed()) return false;
    channel->abandon();
    backend->cancel(id);
    metrics_.record_disconnect(tenant);
    metrics_.record_response(499, tenant);  // nginx's "client closed request"
    x.log.status = 499;
    return true;
  };
  // Until the first text the answer may still be an error with its own status.
  while (!channel->wait_started(kHangUpPoll))
    if (client_left()) return;
  x.log.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - x.log.start).count();
  const int timeout = options_.timeout_seconds;
  if (channel->done() && !channel->has_text() && !answered(channel->result().end)) {
    note_result(channel->result());
    return fail(error_for(channel->result(), timeout, backend->load().running > 0));
  }
  const ResponseIds ids = make_response_ids(endpoint, options_.model_name);

  std::vector<StepLogprobs> steps;
  size_t text_offset = 0;  // completions' logprobs.text_offset
  auto take_logprobs = [&]() -> json {
    if (a.logprobs < 0) return nullptr;
    json j = steps.empty() && a.stream ? json(nullptr) : logprobs_json(endpoint, steps, model, &text_offset);
    steps.clear();
    return j;
  };

  if (!a.stream) {
    std::string text;
    while (!channel->wait_take(&text, kHangUpPoll, &steps))
      if (client_left()) return;
    const GenerationResult& r = channel->result();
    note_result(r);
    if (!answered(r.end)) return fail(error_for(r, timeout, backend->load().running > 0));
    metrics_.record_response(200, tenant);
    reply_json(w, x, 200, completion_json(ids, text, r, take_logprobs()));
    return;
  }

  ++active_streams_;
  HeaderList headers = x.headers;
  headers.emplace_back("Cache-Control", "no-cache");
  headers.emplace_back("X-Accel-Buffering", "no");  // nginx: pass events through at once
  x.log.status = 200;
  bool counted = false;  // its response was counted in the metrics
  bool gone = !w.begin_stream(200, "text/event-stream", headers);
  if (!gone && endpoint == Endpoint::kChat) gone = !w.write_chunk(sse_event(text_chunk_json(ids, "", true, a.include_usage)));
  while (!gone) {
    std::string text;
    const bool done = channel->wait_take(&text, std::chrono::milliseconds(200), &steps);
    std::string out;
    // Logprobs ride with the text of their tokens (a token whose text is held back, e.g.
    // half a UTF-8 character, sends its logprobs with the next text or the final chunk).
    if (!text.empty()) out = sse_event(text_chunk_json(ids, text, false, a.include_usage, take_logprobs()));
    if (done) {
      const GenerationResult& r = channel->result();
      note_result(r);
      const bool ok = answered(r.end);
      if (ok) {
        out += sse_event(final_chunk_json(ids, r, a.include_usage, take_logprobs()));
        if (a.include_usage) out += sse_event(usage_chunk_json(ids, r));
      } else {
        out += sse_event(error_json(error_for(r, timeout, backend->load().running > 0)));
      }
      out += sse_done();
      // Counted before the last bytes go out, so a client that has read [DONE] sees it in /metrics.
      metrics_.record_response(ok ? 200 : 500, tenant);
      counted = true;
      if (!ok) x.log.status = 500;
      if (w.write_chunk(out) && w.end_stream()) {
        --active_streams_;
        return;
      }
      gone = true;
      break;
    }
    // Nothing new: a client that left shows on its socket, not at a write.
    gone = out.empty() ? w.peer_closed() : !w.write_chunk(out);
  }
  // The client left (or the server stopped) mid-stream.
  channel->abandon();
  backend->cancel(id);
  metrics_.record_disconnect(tenant);
  if (!counted) {
    metrics_.record_response(499, tenant);  // nginx's "client closed request"
    x.log.status = 499;
  }
  --active_streams_;
}

}  // namespace vlkv::server
