// One structured line per request on stderr (logfmt: key=value, values without spaces or
// quoted), written when the request ends, so a log can be grepped and summed:
//   vlkv serve: request id=... method=POST path=/v1/chat/completions status=200 ms=812.4
//     prompt_tokens=31 gen_tokens=8 ttft_ms=640.2 tok_s=45.1 kv=kivi2 kv_bytes=24576
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace vlkv::server {

struct RequestLog {
  std::string id;      // x-request-id
  std::string method;
  std::string path;
  int status = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  // A generation's figures (zero / empty for other routes).
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double ttft_ms = 0;      // request read → first text ready
  double tokens_per_second = 0;  // generated tokens / decode time
  std::string kv_method;
  double kv_bytes = 0;     // KV bytes the request's cache held at its end
};

// The line (no trailing newline).
std::string format_request_log(const RequestLog& log);
// Writes the line to stderr in one call (lines from concurrent requests do not mix).
void write_request_log(const RequestLog& log);

}  // namespace vlkv::server
