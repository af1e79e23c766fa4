// Starts `vlkv serve` as a child process on 127.0.0.1 with a free port (--port 0; the port
// is read from its stderr log), talks to it with cpp-httplib's client, and stops it
// (SIGTERM, bounded wait, SIGKILL as the last resort). Everything is bounded in time.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/data_uri.h"
#include "server/sse_reader.h"

namespace vlkv::testing_serve {

inline std::string model_path() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes.gguf"; }
inline std::string mmproj_path() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes-mmproj.gguf"; }
inline std::string stories_path() { return std::string(VLKV_SOURCE_DIR) + "/models/stories260K.gguf"; }
inline std::string demo_image(const char* name) { return std::string(VLKV_SOURCE_DIR) + "/models/demo/" + name; }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A port nothing listens on now (bound to 0 and released: a tiny race, fine on loopback).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// Under AddressSanitizer a freed block waits in a quarantine (256 MiB by default) and freed
// pages stay with the allocator, so the server's RSS grows with what it freed, not with what
// it holds. A test that bounds the server's RSS starts it with Rss::kHonest: these settings
// are appended to the inherited ASAN_OPTIONS (a later flag wins; a build without ASan ignores
// them), so only that server gives up the quarantine's use-after-free reach.
inline constexpr const char* kHonestRssAsanOptions = "quarantine_size_mb=0:allocator_release_to_os_interval_ms=0";
enum class Rss { kAsIs, kHonest };

// The environment for a server started with rss: this process's, ASAN_OPTIONS amended.
inline std::vector<std::string> server_environment(Rss rss) {
  std::vector<std::string> env;
  std::string asan;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    if (rss == Rss::kHonest && var.rfind("ASAN_OPTIONS=", 0) == 0) asan = var.substr(13);
    else env.push_back(var);
  }
  if (rss == Rss::kHonest) env.push_back("ASAN_OPTIONS=" + asan + (asan.empty() ? "" : ":") + kHonestRssAsanOptions);
  return env;
}

// The first sanitizer report in a log (ASan, LeakSanitizer, UBSan) and what follows it, at most
// 4 KB; empty if there is none.
inline std::string sanitizer_report(const std::string& log) {
  size_t at = std::string::npos;
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: "})
    at = std::min(at, log.find(marker));
  if (at == std::string::npos) return "";
  const size_t line = log.rfind('\n', at);
  return log.substr(line == std::string::npos ? 0 : line + 1, 4096);
}

class ServerProcess {
 public:
  // args after "serve" (model, flags); --host 127.0.0.1 --port 0 are added.
  explicit ServerProcess(const std::vector<std::string>& args, Rss rss = Rss::kAsIs) {
    static int counter = 0;
    log_path_ = ::testing::TempDir() + "vlkv_serve_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".log";
    std::vector<std::string> argv = {VLKV_CLI_PATH, "serve", "--host", "127.0.0.1", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    // Built before fork: the child of a threaded process should do as little as it can.
    std::vector<std::string> env = server_environment(rss);
    std::vector<char*> cargv, cenv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (std::string& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    // A log left by an earlier test process with the same pid would read as "ready" on a
    // dead port before the child truncates it: start from no file.
    std::remove(log_path_.c_str());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = std::freopen(log_path_.c_str(), "w", stderr);
      (void)log;
      execve(cargv[0], cargv.data(), cenv.data());
      _exit(127);
    }
    // Ready once the log says so (the model loaded), at most 60 s.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      const std::string log = read_file(log_path_);
      const size_t at = log.find("listening on http://127.0.0.1:");
      if (at != std::string::npos && port_ == 0) port_ = std::atoi(log.c_str() + at + 30);
      if (log.find(" ready (") != std::string::npos) return;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // A sanitizer report in the server's log fails the test that ran it: the child's exit status
  // is not the test's, so a use-after-free, UB or leak in `vlkv serve` would otherwise pass.
  ~ServerProcess() {
    stop();
    const std::string report = sanitizer_report(log());
    if (!report.empty()) ADD_FAILURE() << "vlkv serve's log holds a sanitizer report:\n" << report;
    std::remove(log_path_.c_str());
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool running() const { return pid_ > 0 && port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return read_file(log_path_); }
  httplib::Client client(int read_timeout_s = 60) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(read_timeout_s, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }

  // SIGTERM and wait (bounded): the exit status, or -1 if it had to be killed.
  int stop(int signal = SIGTERM, int wait_ms = 15000) {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, signal);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    int status = 0;
    while (std::chrono::steady_clock::now() < until) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = -1;
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::string log_path_;
};

struct HttpReply {
  int status = 0;  // 0: no response (connection failed)
  std::string error;  // then httplib's reason
  std::string body;
  nlohmann::json json;  // parsed body (discarded if not JSON)
};

inline HttpReply post(httplib::Client& c, const std::string& path, const std::string& body,
                      const httplib::Headers& headers = {}) {
  HttpReply r;
  auto res = c.Post(path.c_str(), headers, body, "application/json");
  if (!res) {
    r.error = httplib::to_string(res.error());
    return r;
  }
  r.status = res->status;
  r.body = res->body;
  r.json = nlohmann::json::parse(r.body, nullptr, false);
  return r;
}

inline HttpReply get(httplib::Client& c, const std::string& path, const httplib::Headers& headers = {}) {
  HttpReply r;
  auto res = c.Get(path.c_str(), headers);
  if (!res) return r;
  r.status = res->status;
  r.body = res->body;
  r.json = nlohmann::json::parse(r.body, nullptr, false);
  return r;
}

// A streaming POST: the SSE "data: " payloads in order (stop_after > 0: hang up after that
// many events, as a client that goes away).
struct StreamReply {
  int status = 0;
  std::string error;  // no response: httplib's reason
  std::vector<std::string> events;
  bool complete = false;  // ended with [DONE]
};

inline StreamReply post_stream(httplib::Client& c, const std::string& path, const std::string& body,
                               size_t stop_after = 0) {
  StreamReply r;
  server::SseReader sse;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& res) {
    r.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    for (std::string& event : sse.feed(data, n)) {
      if (event == "[DONE]") r.complete = true;
      else r.events.push_back(std::move(event));
    }
    return stop_after == 0 || r.events.size() < stop_after;
  };
  auto res = c.send(req);
  if (!res) r.error = httplib::to_string(res.error());
  if (res && r.status == 0) r.status = res->status;
  if (res && !res->body.empty() && r.events.empty()) r.events.push_back(res->body);  // an error reply
  return r;
}

// The concatenated delta.content (chat) or text (completions) of a stream's chunks.
inline std::string stream_text(const StreamReply& r) {
  std::string text;
  for (const std::string& e : r.events) {
    nlohmann::json j = nlohmann::json::parse(e, nullptr, false);
    if (!j.is_object() || !j.contains("choices") || j["choices"].empty()) continue;
    const nlohmann::json& c = j["choices"][0];
    if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string())
      text += c["delta"]["content"].get<std::string>();
    if (c.contains("text") && c["text"].is_string()) text += c["text"].get<std::string>();
  }
  return text;
}

// A Prometheus sample's value ("name" or "name{labels}"), -1 if absent.
// A process's peak resident set (VmHWM) since the last reset_peak (0 if unreadable): what a
// request cost the server at its worst, where its RSS afterwards may already be back down.
inline uint64_t peak_bytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}
inline bool reset_peak(pid_t pid) {
  std::ofstream f("/proc/" + std::to_string(pid) + "/clear_refs");
  f << "5";
  return static_cast<bool>(f.flush());
}

inline double metric_value(const std::string& text, const std::string& sample) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  }
  return -1;
}

inline std::string image_data_uri(const std::string& path) {
  Result<std::string> uri = server::image_file_data_uri(path);
  EXPECT_TRUE(uri.is_ok()) << uri.status().message();
  return uri.is_ok() ? *uri : std::string();
}

}  // namespace vlkv::testing_serve
