#include "server/session_backend.h"

#include <algorithm>
#include <atomic>

namespace vlkv::server {

using Clock = std::chrono::steady_clock;

struct SessionBackend::Job {
  uint64_t id = 0;
  GenerationRequest request;
  GenerationCallbacks callbacks;
  Clock::time_point submitted;
  std::atomic<bool> cancelled{false};
};

SessionBackend::SessionBackend(BackendOptions options) : GenerationBackend(std::move(options)) {}

Result<std::unique_ptr<SessionBackend>> SessionBackend::create(const BackendOptions& options) {
  VLKV_RETURN_IF_ERROR(check_options(options));
  if (options.n_slots < 1 || options.n_slots > 1024) return invalid_argument("-np must be in [1, 1024]");
  std::unique_ptr<SessionBackend> b(new SessionBackend(options));
  for (const std::string& method : options.kv_methods) {
    if (b->engines_.count(method)) continue;
    EngineParams p = options.engine;
    p.kv_method = method;
    Result<std::unique_ptr<Engine>> e = Engine::load(p);
    // A refused --kv-allow method is named as the scheduler backend names it (the caller
    // names --kv only for the first, the default method).
    if (!e.is_ok() && method != options.kv_methods.front())
      return e.status().with_context("--kv-allow '" + method + "'").with_kind(ErrorKind::kGeneral);
    if (!e.is_ok()) return e.status();
    b->engines_.emplace(method, std::move(e).value());
  }
  for (int i = 0; i < options.n_slots; ++i) b->workers_.emplace_back([raw = b.get()] { raw->worker_loop(); });
  return b;
}

SessionBackend::~SessionBackend() { shutdown(std::chrono::milliseconds(0)); }

uint64_t SessionBackend::submit(GenerationRequest request, GenerationCallbacks callbacks) {
  auto job = std::make_shared<Job>();
  job->request = std::move(request);
  job->callbacks = std::move(callbacks);
  job->submitted = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || !engines_.count(job->request.kv_method)) return 0;
    // A free slot takes the job at once; otherwise it waits, up to max_queue of them.
    const int64_t free_slots = options_.n_slots - running_ - static_cast<int64_t>(queue_.size());
    if (free_slots <= 0 && static_cast<int64_t>(queue_.size()) >= options_.max_queue) return 0;
    job->id = next_id_++;
    jobs_[job->id] = job;
    queue_.push_back(job);
  }
  work_cv_.notify_one();
  return job->id;
}

void SessionBackend::cancel(uint64_t id) {
  std::shared_ptr<Job> queued;  // still waiting: it leaves the queue now, not when a worker frees
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    it->second->cancelled = true;
    auto q = std::find(queue_.begin(), queue_.end(), it->second);
    if (q == queue_.end()) return;  // running: it stops at its next token
    queued = *q;
    queue_.erase(q);
    jobs_.erase(it);
  }
  GenerationResult r;
  r.end = GenerationEnd::kCancelled;
  queued->callbacks.on_done(r);
}

BackendLoad SessionBackend::load() const {
  BackendLoad l;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    l.running = running_;
    l.queued = static_cast<int64_t>(queue_.size());
  }
  for (const std::string& method : options_.kv_methods) {
    const Engine& e = *engines_.at(method);
    l.kv.push_back({method, e.kv_bytes_in_use(), e.params().kv_budget_bytes, e.kv_bits_per_element()});
  }
  return l;
}

void SessionBackend::shutdown(std::chrono::milliseconds grace) {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (workers_.empty()) return;
    stopping_ = true;
    dropped.swap(queue_);
    for (const auto& job : dropped) jobs_.erase(job->id);
  }
  work_cv_.notify_all();
  for (const auto& job : dropped) {
    GenerationResult r;
    r.end = GenerationEnd::kCancelled;
    r.status = Status(StatusCode::kInternal, "the server is shutting down");
    job->callbacks.on_done(r);
  }
  // Running requests get the grace period, then are cancelled at their next token.
  const Clock::time_point until = Clock::now() + grace;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (running_ == 0) break;
      if (Clock::now() >= until)
        for (auto& [id, job] : jobs_) job->cancelled = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void SessionBackend::worker_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = queue_.front();
      queue_.pop_front();
      ++running_;
    }
    GenerationResult r = run(*job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.erase(job->id);
      --running_;
    }
    job->callbacks.on_done(r);
  }
}

GenerationResult SessionBackend::run(Job& job) {
  GenerationResult r;
  const GenerationRequest& req = job.request;
  const Clock::time_point started = Clock::now();
  r.queue_seconds = std::chrono::duration<double>(started - job.submitted).count();
  Engine& engine = *engines_.at(req.kv_method);
  r.kv.method = req.kv_method;
  r.kv.bits_per_element = engine.kv_bits_per_element();
  r.kv.bytes_per_token = engine.kv_bytes_per_token();
  if (job.cancelled) {
    r.end = GenerationEnd::kCancelled;
    return r;
  }
  if (started >= req.deadline) {
    r.end = GenerationEnd::kTimeout;
    return r;
  }
  Result<std::unique_ptr<Session>> session = engine.new_session();
  if (!session.is_ok()) {
    r.status = session.status();
    return r;
  }
  bool stopped = false, timed_out = false;
  auto on_piece = [&](const std::string& piece) {
    if (job.cancelled) return false;
    if (Clock::now() >= req.deadline) {
      timed_out = true;
      return false;
    }
    if (!job.callbacks.on_piece(piece)) {
      stopped = true;
      return false;
    }
    if (options_.token_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(options_.token_delay_ms));
    return true;
  };
  // The same call as vlkv run: prepare (BOS on the first turn), prefill, sample.
  const Status st = (*session)->generate(req.prompt, req.params, on_piece, &r.stats);
  r.kv.held_bytes = (*session)->kv_held_bytes();
  session->reset();  // frees the KV pages before the client hears it is done
  const int64_t n_ctx = engine.params().n_ctx;
  if (job.cancelled) r.end = GenerationEnd::kCancelled;
  else if (timed_out) r.end = GenerationEnd::kTimeout;
  else if (stopped) r.end = GenerationEnd::kStopped;
  else if (!st.is_ok() && r.stats.n_generated > 0 && r.stats.n_prompt_tokens + r.stats.n_generated >= n_ctx)
    r.end = GenerationEnd::kLength;  // the context filled up while generating
  else if (!st.is_ok()) r.status = st;
  else r.end = r.stats.stopped_at_eos ? GenerationEnd::kEndOfText : GenerationEnd::kLength;
  return r;
}

}  // namespace vlkv::server
