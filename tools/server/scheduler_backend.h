// GenerationBackend over the continuous-batching Scheduler (include/vlkv/scheduler.h):
// one Engine, one KV pool and budget shared by every request, each request with its own
// KV method; running requests advance together, one batched forward pass per step.
// Every prompt, with or without images, is assembled by Engine::prepare_prompt (the function
// vlkv run and the session backend use; images encoded on the submitting HTTP thread, under
// the engine's forward lock) and handed to the Scheduler as a PreparedPrompt.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "server/generation_backend.h"
#include "vlkv/scheduler.h"

namespace vlkv::server {

class SchedulerBackend final : public GenerationBackend {
 public:
  static Result<std::unique_ptr<SchedulerBackend>> create(const BackendOptions& options);
  ~SchedulerBackend() override;  // shuts down, then ends the scheduler before the members it calls back into

  const Engine& model() const override { return *engine_; }
  double kv_bits_per_element(const std::string& method) const override { return bits_.at(method); }
  uint64_t submit(GenerationRequest request, GenerationCallbacks callbacks) override;
  void cancel(uint64_t id) override;
  BackendLoad load() const override;
  void shutdown(std::chrono::milliseconds grace) override;

 private:
  struct Job;
  explicit SchedulerBackend(BackendOptions options) : GenerationBackend(std::move(options)) {}
  bool on_event(Job& job, const TokenEvent& ev);
  void fail(GenerationCallbacks& callbacks, const std::string& method, Status status);

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<std::string, double> bits_;  // bits/element per allowed method
  mutable std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_;  // submitted, not finished
  uint64_t next_id_ = 1;
  bool stopping_ = false;
};

}  // namespace vlkv::server
