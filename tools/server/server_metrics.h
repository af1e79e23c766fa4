// The server's counters and their Prometheus text exposition (GET /metrics): requests
// by outcome, prompt and generated tokens with their throughput, and KV memory per
// method from the backend. Counted for the whole server and per tenant (tenants.h), so a
// tenant can be shown only its own requests. Thread safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "server/generation_backend.h"

namespace vlkv::server {

class ServerMetrics {
 public:
  // A generation of tenant's that finished (any end): its tokens and times, per KV method.
  void record_generation(const GenerationResult& r, const std::string& tenant = "");
  // An HTTP request to a generation endpoint answered with status (2xx: done, else failed).
  void record_response(int status, const std::string& tenant = "");
  // A streaming response that lost its client.
  void record_disconnect(const std::string& tenant = "");

  // The whole server's counters and load's gauges (KV memory, caches, queue).
  std::string prometheus(const BackendLoad& load) const;
  // One tenant's request counters alone: no gauge of the whole server, which would show
  // other tenants' requests (a cache hit counter moving when another's prompt hits).
  std::string prometheus_of(const std::string& tenant) const;

 private:
  struct PerMethod {
    int64_t requests = 0;
    int64_t prompt_tokens = 0;
    int64_t generated_tokens = 0;
  };
  struct Counters {
    int64_t done = 0, failed = 0, disconnected = 0;
    int64_t prompt_tokens = 0, generated_tokens = 0;
    double prefill_seconds = 0, decode_seconds = 0;
    std::map<int, int64_t> failed_by_status;
    std::map<std::string, PerMethod> per_method;
  };
  static void write_counters(std::string& o, const Counters& c, const BackendLoad* load);
  mutable std::mutex mutex_;
  Counters all_;
  std::map<std::string, Counters> by_tenant_;
};

}  // namespace vlkv::server
