// The transport's limits, probed as issue 24's hostile clients do, each bounded: huge and
// numerous headers, slow heads and bodies, chunked bodies over --max-body, pipelining,
// broken framing, a refused request whose body holds another, and the per-address cap.
// Each is refused within about a second holding no memory, or answered correctly.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "serve_raw.h"
#include "serve_util.h"

namespace vlkv {
namespace {

using namespace testing_serve;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

const std::string kAuth = "Authorization: Bearer secret\r\n";

// The server's log holds text within a second (lines are written as requests end).
bool log_has(const ServerProcess& server, const std::string& text) {
  for (int i = 0; i < 50; ++i) {
    if (server.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class ServeLimits : public ::testing::Test {
 protected:
  // Two servers with the same flags: the probes that bound RSS run on memory_server_, whose
  // allocator returns what is freed (Rss::kHonest, for ASan builds); the others keep ASan's
  // quarantine, and with it the reach of its use-after-free checks.
  static std::vector<std::string> flags() {
    return {"-m", stories_path(), "-t", "1", "-np", "1", "--kv-budget", "16M", "--api-key", "secret",
            "--max-body", "1M", "--header-timeout", "1", "--body-timeout", "2",
            "--allowed-hosts", "x"};  // the raw requests' "Host: x"
  }
  static void SetUpTestSuite() {
    server_ = new ServerProcess(flags());
    memory_server_ = new ServerProcess(flags(), Rss::kHonest);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete memory_server_;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->running()) << server_->log();
    ASSERT_TRUE(memory_server_->running()) << memory_server_->log();
  }
  void TearDown() override {  // after each probe the servers still answer at once
    for (ServerProcess* s : {server_, memory_server_}) {
      httplib::Client c = s->client(5);
      EXPECT_EQ(get(c, "/health").status, 200);
    }
  }
  static int port() { return server_->port(); }
  static std::string completion(int max_tokens = 2) {
    return "{\"prompt\":\"Once upon\",\"max_tokens\":" + std::to_string(max_tokens) + ",\"temperature\":0}";
  }
  static ServerProcess* server_;
  static ServerProcess* memory_server_;
};
ServerProcess* ServeLimits::server_ = nullptr;
ServerProcess* ServeLimits::memory_server_ = nullptr;

// memory_server_'s settings reach it: appended to the ASAN_OPTIONS the suite runs under (make
// test-sanitize sets detect_leaks and more), which stay; set alone where there were none.
TEST(ServeEnvironment, HonestRssAppendsToAsanOptions) {
  const char* saved = std::getenv("ASAN_OPTIONS");
  const std::string before = saved ? saved : "";
  const auto asan_entries = [](Rss rss) {
    std::vector<std::string> found;
    for (const std::string& e : server_environment(rss))
      if (e.rfind("ASAN_OPTIONS=", 0) == 0) found.push_back(e);
    return found;
  };
  setenv("ASAN_OPTIONS", "detect_leaks=1:strict_init_order=1", 1);
  EXPECT_EQ(asan_entries(Rss::kHonest), std::vector<std::string>{"ASAN_OPTIONS=detect_leaks=1:strict_init_order=1:" +
                                                                 std::string(kHonestRssAsanOptions)});
  EXPECT_EQ(asan_entries(Rss::kAsIs), std::vector<std::string>{"ASAN_OPTIONS=detect_leaks=1:strict_init_order=1"});
  unsetenv("ASAN_OPTIONS");
  EXPECT_EQ(asan_entries(Rss::kHonest), std::vector<std::string>{"ASAN_OPTIONS=" + std::string(kHonestRssAsanOptions)});
  EXPECT_TRUE(asan_entries(Rss::kAsIs).empty());
  if (saved) setenv("ASAN_OPTIONS", before.c_str(), 1);
}

// A server's log is read for sanitizer reports when it stops (a report fails the test).
TEST(ServeEnvironment, SanitizerReportsFoundInTheServersLog) {
  const std::string ready = "vlkv serve: listening on http://127.0.0.1:4242\nvlkv serve: ready (0.1 s)\n";
  EXPECT_EQ(sanitizer_report(ready), "");
  EXPECT_EQ(sanitizer_report(ready + "src/kv/pool.cpp:10:5: runtime error: signed integer overflow\nmore\n"),
            "src/kv/pool.cpp:10:5: runtime error: signed integer overflow\nmore\n");
  const std::string leak = "\n=================================================================\n==77==ERROR: LeakSanitizer: "
                           "detected memory leaks\n";
  EXPECT_EQ(sanitizer_report(ready + leak).rfind("==77==ERROR: LeakSanitizer", 0), 0u);
  EXPECT_NE(sanitizer_report(ready + "==9==ERROR: AddressSanitizer: heap-use-after-free\n"), "");
}

TEST_F(ServeLimits, HugeHeadRefusedWith431WithoutKeyOrMemory) {
  const uint64_t rss_before = resident_bytes(memory_server_->pid());
  for (int i = 0; i < 5; ++i) {
    RawConnection c(memory_server_->port());
    ASSERT_TRUE(c.ok());
    const auto t0 = Clock::now();
    std::string head = "GET /v1/models HTTP/1.1\r\nHost: x\r\n";
    std::string headers;
    for (int h = 0; h < 200000; ++h) headers += "X-A: b\r\n";  // 1.6 MB of small headers, no key
    c.send(head + headers);  // the server stops reading at 64 KiB
    const std::string reply = c.read_all(3000);
    EXPECT_EQ(reply_statuses(reply), std::vector<int>{431}) << reply.substr(0, 200);
    EXPECT_LT(seconds_since(t0), 2.5);
  }
  const uint64_t rss_after = resident_bytes(memory_server_->pid());
  EXPECT_LT(rss_after, rss_before + (8u << 20)) << rss_before << " -> " << rss_after;
}

TEST_F(ServeLimits, MoreThan100HeadersRefused) {
  RawConnection c(port());
  std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int h = 0; h < 120; ++h) req += "X-" + std::to_string(h) + ": v\r\n";
  c.send(req + "\r\n");
  const std::string reply = c.read_all(2000);
  EXPECT_EQ(reply_statuses(reply), std::vector<int>{431}) << reply;
  EXPECT_NE(reply.find("header fields"), std::string::npos) << reply;
  EXPECT_TRUE(c.closed());
}

TEST_F(ServeLimits, NinetyHeadersAreFine) {
  RawConnection c(port());
  std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int h = 0; h < 90; ++h) req += "X-" + std::to_string(h) + ": v\r\n";
  c.send(req + "\r\n");
  EXPECT_EQ(reply_statuses(c.read_replies(1, 2000)), std::vector<int>{200});
}

TEST_F(ServeLimits, ExpectContinue) {
  const std::string body = completion();
  {  // with the key: 100 Continue, then the answer
    RawConnection c(port());
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth + "Expect: 100-continue\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n");
    const std::string interim = c.read_all(500);
    EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    c.send(body);
    EXPECT_EQ(reply_statuses(c.read_replies(1, 10000)), std::vector<int>{200});
  }
  {  // without: refused at once, no 100 Continue, the body never asked for
    RawConnection c(port());
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 500000\r\n\r\n");
    const std::string reply = c.read_all(3000);
    EXPECT_EQ(reply_statuses(reply), std::vector<int>{401}) << reply;
    EXPECT_TRUE(c.closed());
  }
}

TEST_F(ServeLimits, SlowHeadsTimeOutAndDoNotStarveHealth) {
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(std::make_unique<RawConnection>(port()));
    slow.back()->send("GET /health HTTP/1.1\r\nHo");
  }
  // Twenty idle half-heads hold no thread: /health answers at once.
  const auto t0 = Clock::now();
  httplib::Client c = server_->client(2);
  EXPECT_EQ(get(c, "/health").status, 200);
  EXPECT_LT(seconds_since(t0), 0.5);
  // Each is closed after --header-timeout 1 (logged as 408), even when it trickles bytes.
  slow[0]->send("s");
  const std::string reply = slow[0]->read_all(3000);
  EXPECT_TRUE(slow[0]->closed());
  EXPECT_EQ(reply, "");
  EXPECT_LT(seconds_since(t0), 2.0);
  for (auto& c : slow) {
    c->read_all(1000);
    EXPECT_TRUE(c->closed());
  }
  EXPECT_TRUE(log_has(*server_, "method=- path=- status=408"));
}

TEST_F(ServeLimits, SlowBodyTimesOut) {
  RawConnection c(port());
  const auto t0 = Clock::now();
  c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth + "Content-Length: 100\r\n\r\n{\"prompt\"");
  const std::string reply = c.read_all(4000);
  EXPECT_EQ(reply, "");  // closed, logged as 408
  EXPECT_TRUE(c.closed());
  EXPECT_LT(seconds_since(t0), 3.5);  // --body-timeout 2
  EXPECT_TRUE(log_has(*server_, "method=POST path=/v1/completions status=408"));
}

std::string chunked(const std::string& body, size_t chunk) {
  std::string out;
  for (size_t at = 0; at < body.size(); at += chunk) {
    const std::string part = body.substr(at, chunk);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", part.size());
    out += size + part + "\r\n";
  }
  return out + "0\r\n\r\n";
}

TEST_F(ServeLimits, ChunkedBodiesObeyMaxBody) {
  {  // within --max-body: a chunked request is answered
    RawConnection c(memory_server_->port());
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth + "Transfer-Encoding: chunked\r\n\r\n" +
           chunked(completion(), 5));
    const std::string reply = c.read_replies(1, 10000);
    EXPECT_EQ(reply_statuses(reply), std::vector<int>{200}) << reply;
  }
  const uint64_t rss_before = resident_bytes(memory_server_->pid());
  for (size_t mib : {2, 8, 33}) {  // over --max-body 1M: 413 at the first MiB
    const std::string pad(mib << 20, 'x');
    const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth +
                                "Transfer-Encoding: chunked\r\n\r\n" + chunked("{\"prompt\":\"" + pad + "\"}", 64 << 10);
    // The client reads while it writes, as curl and browsers do. On this project's Firecracker VMs
    // (kernel 6.18) a loopback connection opened right after a refused upload is now and then broken
    // before its first byte reaches the server (send: EPIPE at once, recv: EOF; strace shows the
    // server accept, wait for the head, and time out). The server never saw that request, so it is
    // sent again once on a new connection; a server that answers without a 413 still fails.
    std::string reply;
    double elapsed = 0;
    for (int attempt = 0; attempt < 2 && reply.empty(); ++attempt) {
      RawConnection c(memory_server_->port());
      const auto t0 = Clock::now();
      bool sent = false;
      std::thread sender([&] { sent = c.send(request); });
      reply = c.read_all(3000);
      sender.join();
      elapsed = seconds_since(t0);
      if (!reply.empty() || sent) break;
    }
    EXPECT_EQ(reply_statuses(reply), std::vector<int>{413}) << mib << " MiB: " << reply.substr(0, 300);
    EXPECT_LT(elapsed, 3.0);
  }
  const uint64_t rss_after = resident_bytes(memory_server_->pid());
  EXPECT_LT(rss_after, rss_before + (8u << 20)) << rss_before << " -> " << rss_after;
}

TEST_F(ServeLimits, PipelinedRequestsAnsweredInOrder) {
  RawConnection c(port());
  std::string three;
  for (const char* id : {"one", "two", "three"})
    three += std::string("GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: ") + id + "\r\n\r\n";
  c.send(three);
  const std::string reply = c.read_replies(3, 3000);
  ASSERT_EQ(reply_statuses(reply), (std::vector<int>{200, 200, 200})) << reply;
  const size_t a = reply.find("x-request-id: one"), b = reply.find("x-request-id: two"),
               d = reply.find("x-request-id: three");
  EXPECT_TRUE(a < b && b < d && d != std::string::npos) << reply;
}

TEST_F(ServeLimits, RefusedBodyNeverRunsAsARequest) {
  RawConnection c(port());
  const std::string smuggled = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(smuggled.size()) +
         "\r\n\r\n" + smuggled);
  const std::string reply = c.read_all(3000);
  EXPECT_EQ(reply_statuses(reply), std::vector<int>{401}) << reply;
  EXPECT_TRUE(c.closed());
}

TEST_F(ServeLimits, FramingErrorsGet400AndClose) {
  const std::vector<std::string> bad = {
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth + "Content-Length: 5\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth +
          "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "GET /health HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n",
      "NOT A REQUEST\r\n\r\n",
  };
  for (const std::string& req : bad) {
    RawConnection c(port());
    c.send(req + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");  // never answered: the connection closes
    const std::string reply = c.read_all(3000);
    EXPECT_EQ(reply_statuses(reply), std::vector<int>{400}) << req << "\n---\n" << reply;
    EXPECT_TRUE(c.closed()) << req;
  }
}

TEST_F(ServeLimits, IdleConnectionsHoldLittleMemory) {
  const uint64_t rss_before = resident_bytes(memory_server_->pid());
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<RawConnection>(memory_server_->port()));
    idle.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n" + std::string(30000, 'X'));  // half a head
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t rss_after = resident_bytes(memory_server_->pid());
  EXPECT_LT(rss_after, rss_before + 100 * (1u << 20)) << rss_before << " -> " << rss_after;
  // ≤ 1 MiB each, with room: what is held is the 64 KiB head buffer.
  EXPECT_LT((rss_after - std::min(rss_after, rss_before)) / 100, 256u << 10) << rss_before << " -> " << rss_after;
}

TEST(ServeConnectionCap, MoreConnectionsPerAddressGet503) {
  ServerProcess server({"-m", stories_path(), "-t", "1", "--kv-budget", "16M", "--max-conn-per-ip", "4"});
  ASSERT_TRUE(server.running()) << server.log();
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawConnection>(server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    RawConnection extra(server.port());
    extra.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string reply = extra.read_all(3000);
    EXPECT_EQ(reply_statuses(reply), std::vector<int>{503}) << reply;
  }
  held.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  httplib::Client c = server.client(5);
  EXPECT_EQ(get(c, "/health").status, 200);
}

}  // namespace
}  // namespace vlkv
