#include "server/http_listener.h"

#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/api_error.h"
#include "server/client_connection.h"
#include "server/worker_pool.h"

namespace vlkv::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (beast::iequals(k, beast::string_view(name.data(), name.size()))) return v;
  return {};
}

namespace {

constexpr int kIoThreads = 2;        // reading heads and bodies only: handlers run on the workers
// After a request of this size (an upload of images or video) is done, free memory goes back to
// the system: glibc keeps a freed multi-MiB body (its JSON strings, decoded bytes) in the arena
// of each thread that touched it, up to 8 arenas per core, so RSS grew by ~1 MiB per large
// request under load, for dozens of requests, before levelling off. malloc_trim(0) returns
// the free pages of every arena (measured: median 0.5 ms, at most 8 ms, after 3 MB bodies).
constexpr size_t kTrimAfterBodyBytes = size_t{1} << 20;
constexpr int kListenBacklog = 1024;  // 64 clients connecting at once must not lose SYNs
// After a refusal the unread rest of the request is read (64 KiB at a time: a 33 MiB upload
// drains in ~30 ms, not 2 s of 4 KiB reads on a loaded machine) and dropped for
// a moment before closing, as nginx's lingering close: closing over unread bytes sends a
// reset, and a client still writing its body would never read the refusal.
constexpr size_t kDrainBytes = 64u << 20;
constexpr size_t kDrainChunkBytes = 64u << 10;
constexpr std::chrono::seconds kDrainTimeout{2};
constexpr std::chrono::seconds kRefusalWriteTimeout{5};
constexpr std::chrono::milliseconds kAcceptRetry{50};  // after EMFILE and the like

// Blocking writes to a connection's socket from a worker, each bounded by a deadline: a
// Beast SyncWriteStream over the descriptor (asio's own blocking writes never time out).
class DeadlineStream {
 public:
  DeadlineStream(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {}

  template <class Buffers>
  size_t write_some(const Buffers& buffers, beast::error_code& ec) {
    ec = {};
    size_t total = 0;
    for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers); ++it) {
      const net::const_buffer b = *it;
      if (!send_all(static_cast<const char*>(b.data()), b.size(), ec)) return total;
      total += b.size();
    }
    return total;
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers) {
    beast::error_code ec;
    const size_t n = write_some(buffers, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }

 private:
  bool send_all(const char* p, size_t n, beast::error_code& ec) {
    const Clock::time_point deadline = Clock::now() + timeout_;
    while (n > 0) {
      const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        p += k;
        n -= static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
          ec = beast::error::timeout;
          return false;
        }
        pollfd pfd{fd_, POLLOUT, 0};
        ::poll(&pfd, 1, static_cast<int>(left));
        continue;
      }
      ec = beast::error_code(k < 0 ? errno : EPIPE, beast::system_category());
      return false;
    }
    return true;
  }
  int fd_;
  std::chrono::milliseconds timeout_;
};

// The reply side of one request, on its worker.
class Writer final : public ResponseWriter {
 public:
  // head_only: the request was HEAD, so replies carry the GET's head (its Content-Length) and no body.
  Writer(int fd, std::chrono::milliseconds timeout, bool keep_alive, bool head_only)
      : fd_(fd), stream_(fd, timeout), keep_alive_(keep_alive), head_only_(head_only) {}

  bool send(const HttpReply& reply) override {
    if (started_) return false;
    started_ = true;
    http::response<http::string_body> res;
    res.result(static_cast<unsigned>(reply.status));
    res.set(http::field::content_type, reply.content_type);
    for (const auto& [k, v] : reply.headers) res.insert(k, v);
    if (reply.close) keep_alive_ = false;
    res.keep_alive(keep_alive_);
    res.body() = reply.body;
    res.prepare_payload();
    if (head_only_) {
      http::response_serializer<http::string_body> sr(res);
      http::write_header(stream_, sr, ec_);
    } else {
      http::write(stream_, res, ec_);
    }
    return !ec_;
  }
  bool begin_stream(int status, const std::string& content_type, const HeaderList& headers) override {
    if (started_) return false;
    started_ = true;
    http::response<http::empty_body> res;
    res.result(static_cast<unsigned>(status));
    res.set(http::field::content_type, content_type);
    for (const auto& [k, v] : headers) res.insert(k, v);
    res.keep_alive(keep_alive_);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr(res);
    http::write_header(stream_, sr, ec_);
    streaming_ = !ec_;
    return !ec_;
  }
  bool write_chunk(std::string_view data) override {
    if (!streaming_ || ec_) return false;
    if (data.empty()) return true;  // an empty chunk would end the stream
    net::write(stream_, http::make_chunk(net::buffer(data.data(), data.size())), ec_);
    return !ec_;
  }
  bool end_stream() override {
    if (!streaming_ || ec_) return false;
    net::write(stream_, http::make_chunk_last(), ec_);
    streaming_ = false;
    stream_done_ = !ec_;
    return !ec_;
  }
  bool peer_closed() const override { return ClientConnection(fd_).peer_closed(); }

  bool started() const { return started_; }
  // The connection may carry the next request.
  bool reusable() const { return keep_alive_ && started_ && !ec_ && !streaming_; }

 private:
  int fd_;
  DeadlineStream stream_;
  bool keep_alive_;
  bool head_only_;
  bool started_ = false;
  bool streaming_ = false;
  bool stream_done_ = false;
  beast::error_code ec_;
};

// Open connections per client address (the cap holds before a byte is read).
class AddressCounts {
 public:
  bool acquire(const std::string& address, int cap) {
    std::lock_guard<std::mutex> lock(mutex_);
    int& n = counts_[address];
    if (n >= cap) return false;
    ++n;
    return true;
  }
  void release(const std::string& address) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = counts_.find(address);
    if (it != counts_.end() && --it->second <= 0) counts_.erase(it);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, int> counts_;
};

HttpReply error_reply(const ApiError& e) { return {e.code, "application/json", dump_json(error_json(e)), {}, true}; }

}  // namespace

class HttpListener::Impl {
 public:
  Impl(HttpLimits limits, HttpHandlers handlers, int n_workers)
      : limits(limits), handlers(std::move(handlers)), acceptor(ioc), retry_timer(ioc), workers(n_workers) {}

  void accept();

  const HttpLimits limits;
  const HttpHandlers handlers;
  std::atomic<bool> stopping{false};
  AddressCounts counts;         // before ioc: connections still queued there release on its destruction
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  WorkerPool workers;           // last: joined first
};

namespace {

// One client connection: reads a request (head, admission, body) on the I/O threads,
// hands it to a worker, and reads the next only once the reply is written.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpListener::Impl& listener, std::string address, bool counted)
      : stream_(std::move(socket)),
        buffer_(2 * static_cast<size_t>(listener.limits.max_header_bytes) + (64u << 10)),
        listener_(listener),
        address_(std::move(address)),
        counted_(counted) {}
  ~Connection() {
    if (counted_) listener_.counts.release(address_);
  }

  void start() { read_head(); }
  void refuse_busy() {
    refuse(error_reply(unavailable("too many connections from " + address_ + " (the server's cap per address)")),
           false);
  }

 private:
  const HttpLimits& limits() const { return listener_.limits; }

  void read_head() {
    if (listener_.stopping) return;
    parser_.emplace();
    parser_->header_limit(limits().max_header_bytes);
    parser_->body_limit(limits().max_body_bytes);
    stream_.expires_after(limits().header_timeout);
    http::async_read_header(stream_, buffer_, *parser_, beast::bind_front_handler(&Connection::on_head, shared_from_this()));
  }

  // The parsed head as the handlers see it. Its fields are copied up to one past the limit
  // (enough to refuse; 64 KiB of empty fields would be 16k copies).
  void take_head() {
    const auto& m = parser_->get();
    request_ = HttpRequest{};
    request_.method = std::string(m.method_string());
    request_.target = std::string(m.target());
    request_.path = request_.target.substr(0, request_.target.find('?'));
    for (const auto& f : m) {
      if (request_.headers.size() > static_cast<size_t>(limits().max_header_count)) break;
      request_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    request_.remote_address = address_;
  }

  void on_head(beast::error_code ec, size_t) {
    if (ec) return on_read_error(ec, false);
    const auto& m = parser_->get();
    take_head();
    if (request_.headers.size() > static_cast<size_t>(limits().max_header_count))
      return refuse(error_reply({431, "invalid_request_error",
                                 "more than " + std::to_string(limits().max_header_count) + " header fields"}),
                    true);
    if (std::optional<HttpReply> r = listener_.handlers.admit(request_)) {
      r->close = true;
      return refuse(std::move(*r), true, /*logged=*/true);
    }
    if (beast::iequals(m[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(kRefusalWriteTimeout);
      return net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code e, size_t) {
        if (!e) self->read_body();
      });
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(limits().body_timeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Connection::on_body, shared_from_this()));
  }

  void on_body(beast::error_code ec, size_t) {
    if (ec) return on_read_error(ec, true);
    request_.body = std::move(parser_->get().body());
    keep_alive_ = parser_->get().keep_alive();
    parser_.reset();
    stream_.expires_never();
    listener_.workers.post([self = shared_from_this()] { self->serve(); });
  }

  void on_read_error(beast::error_code ec, bool head_read) {
    // A Content-Length over --max-body fails the head after its last field was parsed.
    if (!head_read && (parser_->is_header_done() || ec == http::error::body_limit)) {
      take_head();
      head_read = true;
    }
    const bool started = head_read || parser_->got_some();
    if (ec == beast::error::timeout) {
      // tcp_stream closed the socket when the deadline passed, so nothing can be written (as
      // nginx, which logs 408 and closes); an idle keep-alive connection is not even logged.
      if ((started || buffer_.size() > 0) && listener_.handlers.refused)
        listener_.handlers.refused(head_read ? &request_ : nullptr, 408);
      return;
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
      return refuse(error_reply({431, "invalid_request_error",
                                 "the request head exceeds " + std::to_string(limits().max_header_bytes) + " bytes"}),
                    head_read);
    if (ec == http::error::body_limit)
      return refuse(error_reply(too_large("the request body exceeds --max-body (" +
                                          std::to_string(limits().max_body_bytes) + " bytes)")),
                    head_read);
    // The client went away (between requests or mid-request): nobody to answer.
    if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted || ec == net::error::broken_pipe)
      return;
    refuse(error_reply(bad_request("malformed HTTP request: " + ec.message())), head_read);
  }

  // Writes the refusal, closes our side and drops what the client still sends for a moment.
  // logged: admit's own refusal, already in the log.
  void refuse(HttpReply reply, bool head_read, bool logged = false) {
    if (!logged && listener_.handlers.refused) {
      HeaderList extra = listener_.handlers.refused(head_read ? &request_ : nullptr, reply.status);
      reply.headers.insert(reply.headers.end(), extra.begin(), extra.end());
    }
    const bool head_only = head_read && request_.method == "HEAD";  // the head of the reply, no body
    parser_.reset();  // a refused body is not kept while the refusal goes out
    request_ = HttpRequest{};
    buffer_.clear();
    buffer_.shrink_to_fit();
    auto res = std::make_shared<http::response<http::string_body>>();
    res->result(static_cast<unsigned>(reply.status));
    res->set(http::field::content_type, reply.content_type);
    for (const auto& [k, v] : reply.headers) res->insert(k, v);
    res->keep_alive(false);
    res->body() = std::move(reply.body);
    res->prepare_payload();
    stream_.expires_after(kRefusalWriteTimeout);
    auto sr = std::make_shared<http::response_serializer<http::string_body>>(*res);
    auto written = [self = shared_from_this(), res, sr](beast::error_code ec, size_t) {
      if (ec) return;
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      self->stream_.expires_after(kDrainTimeout);
      self->drain();
    };
    if (head_only) http::async_write_header(stream_, *sr, std::move(written));
    else http::async_write(stream_, *sr, std::move(written));
  }

  void drain() {
    if (!drain_buf_) drain_buf_ = std::make_unique<char[]>(kDrainChunkBytes);  // only refused connections pay
    stream_.async_read_some(net::buffer(drain_buf_.get(), kDrainChunkBytes), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (!ec && self->drained_ < kDrainBytes) self->drain();
    });
  }

  // On a worker: the handler, then the next request or the end of the connection.
  void serve() {
    const int fd = stream_.socket().native_handle();
    Writer writer(fd, limits().write_timeout, keep_alive_, request_.method == "HEAD");
    listener_.handlers.handle(request_, writer);
    if (!writer.started()) writer.send(error_reply(server_error("the request produced no response")));
    const size_t body_bytes = request_.body.size();
    request_ = HttpRequest{};
    if (body_bytes >= kTrimAfterBodyBytes) malloc_trim(0);
    if (!writer.reusable() || listener_.stopping) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      return;  // closed when the last reference goes
    }
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->read_head(); });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;  // bounded: the head limit plus one read
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  bool keep_alive_ = false;
  std::unique_ptr<char[]> drain_buf_;
  size_t drained_ = 0;
  HttpListener::Impl& listener_;
  std::string address_;
  bool counted_;
};

}  // namespace

void HttpListener::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping || ec == net::error::operation_aborted) return;
    if (ec) {  // out of descriptors and the like: try again shortly, never spin
      retry_timer.expires_after(kAcceptRetry);
      retry_timer.async_wait([this](beast::error_code) { accept(); });
      return;
    }
    beast::error_code e;
    const tcp::endpoint peer = socket.remote_endpoint(e);
    if (!e) {
      socket.set_option(tcp::no_delay(true), e);  // SSE events go out as they come
      std::string address = peer.address().to_string();
      const bool counted = counts.acquire(address, limits.max_connections_per_address);
      auto c = std::make_shared<Connection>(std::move(socket), *this, std::move(address), counted);
      counted ? c->start() : c->refuse_busy();
    }
    accept();
  });
}

HttpListener::HttpListener(HttpLimits limits, HttpHandlers handlers, int n_workers)
    : impl_(std::make_unique<Impl>(limits, std::move(handlers), std::max(1, n_workers))) {}

HttpListener::~HttpListener() { stop(); }

Result<int> HttpListener::bind(const std::string& host, int port) {
  beast::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  const auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, ec);
  const auto fail = [&] {
    return Status(StatusCode::kIoError,
                  "cannot listen on " + host + ":" + std::to_string(port) + " (address in use or not local?)");
  };
  if (ec || results.empty()) return fail();
  const tcp::endpoint ep = results.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  // SO_REUSEADDR only (no SO_REUSEPORT): a second server must not share the port.
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(kListenBacklog, ec);
  if (ec) return fail();
  return static_cast<int>(a.local_endpoint().port());
}

void HttpListener::run() {
  if (impl_->stopping) return;
  net::post(impl_->ioc, [this] { impl_->accept(); });
  std::vector<std::thread> threads;
  for (int i = 1; i < kIoThreads; ++i) threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (std::thread& t : threads) t.join();
}

void HttpListener::stop() {
  if (impl_->stopping.exchange(true)) return;
  impl_->ioc.stop();
  impl_->workers.stop();
}

}  // namespace vlkv::server
