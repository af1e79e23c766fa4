// GenerationBackend over today's Engine/Session API: n_slots worker threads, each running
// one request at a time in a Session of its own (KV pages freed when it ends); a bounded
// FIFO queue in front. One Engine per KV method (the Engine's cache has one method), so
// each method has its own --kv-budget. Sessions of one engine take turns one forward pass
// at a time (the engine's forward mutex): concurrency without batching.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "server/generation_backend.h"

namespace vlkv::server {

class SessionBackend final : public GenerationBackend {
 public:
  // Loads the model once per KV method; the errors of Engine::load.
  static Result<std::unique_ptr<SessionBackend>> create(const BackendOptions& options);
  ~SessionBackend() override;

  const Engine& model() const override { return *engines_.at(options_.kv_methods.front()); }
  double kv_bits_per_element(const std::string& method) const override {
    return engines_.at(method)->kv_bits_per_element();
  }
  uint64_t submit(GenerationRequest request, GenerationCallbacks callbacks) override;
  void cancel(uint64_t id) override;
  BackendLoad load() const override;
  void shutdown(std::chrono::milliseconds grace) override;

 private:
  struct Job;
  explicit SessionBackend(BackendOptions options);
  void worker_loop();
  GenerationResult run(Job& job);

  std::map<std::string, std::unique_ptr<Engine>> engines_;  // by method spec
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_;  // queued and running, by id
  uint64_t next_id_ = 1;
  int64_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace vlkv::server
