// What the HTTP server needs from an engine: submit a prepared prompt, get its tokens'
// bytes through a callback, cancel it, and read load and KV memory for /metrics. The
// server knows nothing else about how requests are batched or scheduled, so a batched
// engine can replace the session worker pool (session_backend.h) behind it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/scheduler.h"  // PrefixCacheMethodStats
#include "vlkv/status.h"

namespace vlkv::server {

struct GenerationRequest {
  Prompt prompt;          // assembled: chat template applied, one media marker per item
  GenerateParams params;  // max_tokens already bounded by the context
  std::string kv_method;  // one of GenerationBackend::kv_methods()
  uint64_t cache_owner = 0;  // its tenant (Request::cache_owner): --cache-tenant-share counts per owner
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// How a generation ended.
enum class GenerationEnd {
  kEndOfText,  // the model's end-of-generation token
  kLength,     // max_tokens or the context reached
  kStopped,    // on_piece returned false (a stop string)
  kCancelled,  // cancel(), a client gone, or the server shutting down
  kTimeout,    // deadline passed (queued or running)
  kError,      // status says why
};

struct KvUsage {
  std::string method;
  double bits_per_element = 0;  // stored bits per K/V element incl. metadata
  double bytes_per_token = 0;   // the method's steady-state report
  uint64_t held_bytes = 0;      // bytes of the KV pages this request's cache held at its end
};

struct GenerationResult {
  GenerationEnd end = GenerationEnd::kError;
  Status status;                // kError: the reason (InvalidArgument: the request's fault)
  GenerateStats stats;
  KvUsage kv;
  double queue_seconds = 0;     // submitted → started
};

struct GenerationCallbacks {
  // Each generated token's bytes, on a backend thread, in order; false stops the generation.
  std::function<bool(const std::string& piece)> on_piece;
  // Exactly once, after the last on_piece, on a backend thread (or in submit's caller for
  // a request that never started).
  std::function<void(const GenerationResult&)> on_done;
};

struct KvMethodLoad {
  std::string method;
  uint64_t bytes_in_use = 0;
  uint64_t budget_bytes = 0;
  double bits_per_element = 0;
};

// CacheStats: the batch backend's caches (stores: --cache-dir, --redis); zero for the sessions backend.
struct BackendLoad : CacheStats {
  int64_t running = 0;
  int64_t queued = 0;
  std::vector<KvMethodLoad> kv;  // one per method: pages held by requests (prefix-cache entries apart)
  bool one_pool = false;         // the methods share one pool (batch backend): their budget_bytes is one budget
};

// What both backends are built from (vlkv serve's flags).
struct BackendOptions {
  EngineParams engine;                  // engine.kv_method is ignored: kv_methods gives them
  std::vector<std::string> kv_methods;  // first = default
  int n_slots = 4;                      // requests generating at once (-np)
  int max_queue = 64;                   // requests waiting beyond the slots; more are refused
  int token_delay_ms = 0;               // testing aid: sleep after each generated token
  uint64_t cache_budget_bytes = 0;      // --cache-budget: the batch backend's prefix cache (0: off)
  double cache_tenant_share = 1.0;      // --cache-tenant-share: of it, the most one tenant's entries hold
  std::shared_ptr<PrefixStore> shared_store;  // --redis: prefix-cache entries shared by replicas (null: none)
  std::shared_ptr<PrefixStore> spill_store;   // --cache-dir: evicted entries spilled to disk (null: none)
};

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;

  // The model (for prompt assembly, its context and vision support).
  virtual const Engine& model() const = 0;
  // The KV methods requests may name; the first is the default.
  const std::vector<std::string>& kv_methods() const { return options_.kv_methods; }
  // Stored bits per K/V element (metadata included) of one of kv_methods().
  virtual double kv_bits_per_element(const std::string& method) const = 0;

  // Queues a request. 0 (and callbacks untouched) when the queue is full or the backend is
  // shutting down; else its id, and on_done will be called exactly once.
  virtual uint64_t submit(GenerationRequest request, GenerationCallbacks callbacks) = 0;
  // Stops a queued or running request (no-op for an unknown or finished id).
  virtual void cancel(uint64_t id) = 0;

  virtual BackendLoad load() const = 0;
  // Refuse new requests, let running ones finish for up to grace, cancel the rest; returns
  // once every on_done has been called.
  virtual void shutdown(std::chrono::milliseconds grace) = 0;

 protected:
  explicit GenerationBackend(BackendOptions options) : options_(std::move(options)) {}
  // What every backend refuses before loading anything: no KV method, a negative queue.
  static Status check_options(const BackendOptions& options) {
    if (options.kv_methods.empty()) return invalid_argument("no KV method");
    if (options.max_queue < 0) return invalid_argument("--max-queue must be >= 0");
    return Status::ok();
  }

  const BackendOptions options_;
};

}  // namespace vlkv::server
