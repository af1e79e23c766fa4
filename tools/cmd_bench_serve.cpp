// `vlkv bench-serve`: a load generator for an OpenAI-compatible server (vlkv serve,
// llama-server, vLLM). At each concurrency level it keeps that many streaming chat
// requests in flight until --requests are done and reports what vLLM's serving benchmark
// reports: request throughput, output tok/s, TTFT, TPOT and ITL (mean, p50, p99), failures,
// and the server's own peak of requests running at once and KV bytes in use (/metrics).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "kv_flags.h"
#include "server/data_uri.h"
#include "server/sse_reader.h"

namespace vlkv::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string concurrency = "1,8,32";
  int requests = 64;
  std::string prompt = "Describe the image.";
  std::string image;
  std::string kv;  // "" = the server's default
  int max_tokens = 64;
  std::string api_key;
  int timeout_s = 600;
  bool as_json = false;
  bool distinct = false;  // each request's message starts with its own number
};

// One request as the client saw it.
struct Sample {
  bool ok = false;
  double e2e = 0, ttft = 0;       // seconds
  int64_t output_tokens = 0;      // the usage chunk's completion_tokens
  std::vector<double> itl;        // seconds between content chunks
  std::string error;              // why it failed
};

struct Summary {
  double mean = 0, p50 = 0, p99 = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  // Nearest-rank percentiles.
  auto rank = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  return s;
}

Sample one_request(httplib::Client& client, const std::string& body, const std::string& api_key) {
  Sample s;
  server::SseReader sse;
  bool done = false, failed = false;
  Clock::time_point t0 = Clock::now(), last;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body;
  req.set_header("Content-Type", "application/json");
  if (!api_key.empty()) req.set_header("Authorization", "Bearer " + api_key);
  int status = 0;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    for (const std::string& e : sse.feed(data, n)) {
      if (e == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(e, nullptr, false);
      if (!j.is_object() || j.contains("error")) {
        failed = true;
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) s.output_tokens = j["usage"].value("completion_tokens", 0);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const json& delta = j["choices"][0].value("delta", json::object());
      if (!delta.contains("content") || !delta["content"].is_string() || delta["content"].get<std::string>().empty())
        continue;
      const Clock::time_point now = Clock::now();
      if (s.ttft == 0) s.ttft = std::chrono::duration<double>(now - t0).count();
      else s.itl.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    }
    return true;
  };
  auto res = client.send(req);
  s.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  s.ok = res && status == 200 && done && !failed;
  if (!res) s.error = "no response (" + httplib::to_string(res.error()) + ")";
  else if (!s.ok) s.error = "HTTP " + std::to_string(status) + (done ? "" : ", no [DONE]");
  return s;
}

// The server's own gauges while a level runs, from its Prometheus /metrics (every 100 ms):
// the most requests it had generating at once and the most KV bytes in use. vlkv serve
// names them vlkv:requests_running and vlkv:kv_bytes_in_use{method=...}; llama-server
// (with --metrics) llamacpp:requests_processing. -1: the server reports neither.
class ServerGaugePoller {
 public:
  ServerGaugePoller(const std::string& url, const std::string& api_key) {
    thread_ = std::thread([this, url, api_key] {
      httplib::Client c(url);
      c.set_connection_timeout(2, 0);
      c.set_read_timeout(2, 0);
      httplib::Headers h;
      if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
      while (!stop_) {
        if (auto res = c.Get("/metrics", h); res && res->status == 200) read(res->body);
        for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
  }
  ~ServerGaugePoller() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  double peak_running() const { return peak_running_; }
  double peak_kv_bytes() const { return peak_kv_; }

 private:
  void read(const std::string& text) {
    double running = -1, kv = -1;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(pos, end - pos);
      pos = end + 1;
      const size_t sp = line.rfind(' ');
      if (line.empty() || line[0] == '#' || sp == std::string::npos) continue;
      const std::string name = line.substr(0, sp);
      const double v = std::strtod(line.c_str() + sp + 1, nullptr);
      if (name == "vlkv:requests_running" || name == "llamacpp:requests_processing") running = v;
      else if (name.rfind("vlkv:kv_bytes_in_use", 0) == 0) kv = std::max(kv, 0.0) + v;  // summed over methods
    }
    peak_running_ = std::max(peak_running_, running);
    peak_kv_ = std::max(peak_kv_, kv);
  }
  std::thread thread_;
  std::atomic<bool> stop_{false};
  double peak_running_ = -1, peak_kv_ = -1;  // written by the thread only, read after finish()
};

// Request i's body: one shared text, or (--distinct) a message that starts with a number
// no other request of the run has, so a server's prompt cache (llama-server reuses a
// slot's common prefix) cannot skip the prefill of a repeated prompt.
using BodyOf = std::function<std::string(int)>;

json run_level(const BenchServeOptions& o, int concurrency, const BodyOf& body) {
  ServerGaugePoller gauges(o.url, o.api_key);
  std::atomic<int> next{0};
  std::vector<Sample> samples(static_cast<size_t>(o.requests));
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      httplib::Client client(o.url);
      client.set_read_timeout(o.timeout_s, 0);
      client.set_connection_timeout(10, 0);
      for (int i; (i = next.fetch_add(1)) < o.requests;) samples[static_cast<size_t>(i)] = one_request(client, body(i), o.api_key);
    });
  }
  for (std::thread& t : workers) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - t0).count();
  gauges.finish();
  int ok = 0;
  int64_t tokens = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  std::map<std::string, int> errors;
  for (const Sample& s : samples) {
    if (!s.ok) ++errors[s.error];
    if (!s.ok) continue;
    ++ok;
    tokens += s.output_tokens;
    ttft.push_back(s.ttft * 1e3);
    e2e.push_back(s.e2e * 1e3);
    if (s.output_tokens > 1) tpot.push_back((s.e2e - s.ttft) * 1e3 / static_cast<double>(s.output_tokens - 1));
    for (double x : s.itl) itl.push_back(x * 1e3);
  }
  for (const auto& [why, n] : errors) std::fprintf(stderr, "vlkv bench-serve: %d failed: %s\n", n, why.c_str());
  auto stats = [](const std::vector<double>& v) {
    const Summary s = summarize(v);
    return json{{"mean", s.mean}, {"p50", s.p50}, {"p99", s.p99}};
  };
  return {{"concurrency", concurrency}, {"requests", o.requests}, {"completed", ok}, {"failed", o.requests - ok},
          {"duration_s", duration}, {"request_throughput", ok / duration}, {"output_tokens", tokens},
          {"output_tok_s", tokens / duration}, {"ttft_ms", stats(ttft)}, {"tpot_ms", stats(tpot)},
          {"itl_ms", stats(itl)}, {"e2e_ms", stats(e2e)}, {"server_peak_running", gauges.peak_running()},
          {"server_peak_kv_bytes", gauges.peak_kv_bytes()}};
}

int bench_serve(const BenchServeOptions& o) {
  std::vector<int> levels;
  for (const std::string& item : split_kv_method_list(o.concurrency)) {
    char* end = nullptr;
    const long c = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || c < 1 || c > 4096) return report_error(invalid_argument("--concurrency '" + item + "': not in [1, 4096]"));
    levels.push_back(static_cast<int>(c));
  }
  if (levels.empty()) return report_error(invalid_argument("--concurrency: give a list such as 1,8,32"));
  std::string image_uri;
  if (!o.image.empty()) {
    Result<std::string> uri = server::image_file_data_uri(o.image);
    if (!uri.is_ok()) return report_error(uri.status());
    image_uri = std::move(*uri);
  }
  auto body_for = [&o, &image_uri](const std::string& message) {
    json content = message;
    if (!image_uri.empty())
      content = json::array({{{"type", "image_url"}, {"image_url", {{"url", image_uri}}}}, {{"type", "text"}, {"text", message}}});
    json body = {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", o.max_tokens},
                 {"temperature", 0}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    if (!o.kv.empty()) body["kv"] = o.kv;
    return body.dump();
  };
  const std::string shared = body_for(o.prompt);
  std::atomic<int64_t> n_sent{0};  // over all levels: no number repeats
  const BodyOf text = [&](int) {
    return o.distinct ? body_for("Request " + std::to_string(++n_sent) + ". " + o.prompt) : shared;
  };
  {  // Fail fast on an unreachable server.
    httplib::Client probe(o.url);
    probe.set_connection_timeout(5, 0);
    if (!probe.Get("/health")) return report_error(Status(StatusCode::kIoError, o.url + ": no server answers"));
  }
  json rows = json::array();
  if (!o.as_json)
    std::printf("%5s %6s %6s %8s %9s | %8s %8s %8s | %7s %7s %7s | %7s %7s %7s | %7s %8s\n", "conc", "ok", "failed",
                "req/s", "out tok/s", "TTFTmean", "TTFTp50", "TTFTp99", "TPOTavg", "TPOTp50", "TPOTp99", "ITLmean",
                "ITLp50", "ITLp99", "run max", "KV MiB");
  for (int c : levels) {
    json r = run_level(o, c, text);
    r["kv"] = o.kv.empty() ? "default" : o.kv;
    r["image"] = !o.image.empty();
    rows.push_back(r);
    if (o.as_json) continue;
    auto ms = [&](const char* k, const char* s) { return r[k][s].get<double>(); };
    auto gauge = [&](const char* k, double scale) {
      const double v = r[k].get<double>();
      return v < 0 ? std::string("-") : std::to_string(static_cast<int64_t>(v / scale + 0.5));
    };
    std::printf("%5d %6d %6d %8.2f %9.1f | %8.1f %8.1f %8.1f | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f | %7s %8s\n", c,
                r["completed"].get<int>(), r["failed"].get<int>(), r["request_throughput"].get<double>(),
                r["output_tok_s"].get<double>(), ms("ttft_ms", "mean"), ms("ttft_ms", "p50"), ms("ttft_ms", "p99"),
                ms("tpot_ms", "mean"), ms("tpot_ms", "p50"), ms("tpot_ms", "p99"), ms("itl_ms", "mean"),
                ms("itl_ms", "p50"), ms("itl_ms", "p99"), gauge("server_peak_running", 1).c_str(),
                gauge("server_peak_kv_bytes", 1 << 20).c_str());
    std::fflush(stdout);
  }
  if (o.as_json) std::printf("%s\n", rows.dump(2).c_str());
  int failed = 0;
  for (const json& r : rows) failed += r["failed"].get<int>();
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace

void add_bench_serve_command(CLI::App& root, std::vector<Command>& commands) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* app = root.add_subcommand("bench-serve", "Load-test an OpenAI-compatible server (TTFT, TPOT, ITL, throughput)");
  app->add_option("--url", o->url, "Server base URL")->capture_default_str();
  app->add_option("--concurrency", o->concurrency, "Requests in flight, one level after another (comma-separated)")
      ->capture_default_str();
  app->add_option("--requests", o->requests, "Requests per concurrency level")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app->add_option("--prompt", o->prompt, "The user message")->capture_default_str();
  app->add_option("--image", o->image, "Send this image with every request (a data: URI)")->check(CLI::ExistingFile);
  app->add_option("--kv", o->kv, "The \"kv\" method of every request (default: the server's)");
  app->add_option("--max-tokens", o->max_tokens, "max_tokens of every request")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app->add_option("--api-key", o->api_key, "Bearer key");
  app->add_option("--timeout", o->timeout_s, "Seconds one request may take")->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app->add_flag("--json", o->as_json, "One JSON object per level instead of the table");
  app->add_flag("--distinct", o->distinct,
                "Start each request's message with its number (\"Request 7. ...\"): no prompt cache can reuse another "
                "request's prefill (llama-server caches a slot's prompt prefix)");
  commands.push_back({app, [o] { return bench_serve(*o); }});
}

}  // namespace vlkv::cli
