#include "server/request_log.h"

#include <cstdio>

namespace vlkv::server {

namespace {

// A value as logfmt writes it: bare when it is plain, else quoted with " and \ escaped;
// control bytes become '?' (a client's path cannot forge a second line).
std::string logfmt_value(const std::string& v) {
  bool plain = !v.empty();
  for (char c : v) plain = plain && c > ' ' && c != '"' && c != '=' && c != '\\' && c != 0x7f;
  if (plain) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += (static_cast<unsigned char>(c) < ' ' || c == 0x7f) ? '?' : c;
  }
  return out + "\"";
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string format_request_log(const RequestLog& log) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - log.start).count();
  std::string line = "vlkv serve: request id=" + logfmt_value(log.id) + " method=" + logfmt_value(log.method) +
                     " path=" + logfmt_value(log.path.substr(0, 256)) + " status=" + std::to_string(log.status) +
                     " ms=" + fixed(ms, 1);
  line += " prompt_tokens=" + std::to_string(log.prompt_tokens) + " gen_tokens=" + std::to_string(log.generated_tokens) +
          " ttft_ms=" + fixed(log.ttft_ms, 1) + " tok_s=" + fixed(log.tokens_per_second, 1) +
          " kv=" + logfmt_value(log.kv_method.empty() ? "-" : log.kv_method) + " kv_bytes=" + fixed(log.kv_bytes, 0);
  return line;
}

void write_request_log(const RequestLog& log) {
  const std::string line = format_request_log(log) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace vlkv::server
