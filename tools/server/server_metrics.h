// The server's counters and their Prometheus text exposition (GET /metrics): requests
// by outcome, prompt and generated tokens with their throughput, and KV memory per
// method from the backend. Thread safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "server/generation_backend.h"

namespace vlkv::server {

class ServerMetrics {
 public:
  // A generation that finished (any end): its tokens and times, per KV method.
  void record_generation(const GenerationResult& r);
  // An HTTP request to a generation endpoint answered with status (2xx: done, else failed).
  void record_response(int status);
  // A streaming response that lost its client.
  void record_disconnect();

  std::string prometheus(const BackendLoad& load) const;

 private:
  struct PerMethod {
    int64_t requests = 0;
    int64_t prompt_tokens = 0;
    int64_t generated_tokens = 0;
  };
  mutable std::mutex mutex_;
  int64_t done_ = 0, failed_ = 0, disconnected_ = 0;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  double prefill_seconds_ = 0, decode_seconds_ = 0;
  std::map<int, int64_t> failed_by_status_;
  std::map<std::string, PerMethod> per_method_;
};

}  // namespace vlkv::server
