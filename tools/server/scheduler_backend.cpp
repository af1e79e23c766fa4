#include "server/scheduler_backend.h"

#include <thread>


namespace vlkv::server {

using Clock = std::chrono::steady_clock;

struct SchedulerBackend::Job {
  uint64_t id = 0;
  RequestId request = -1;  // the scheduler's id (-1 until submitted)
  GenerationCallbacks callbacks;
  std::string method;
  Clock::time_point deadline, submitted, first_token;
  int64_t n_prompt = 0, n_generated = 0;
  std::atomic<bool> cancelled{false};
  bool timed_out = false;
};

Result<std::unique_ptr<SchedulerBackend>> SchedulerBackend::create(const BackendOptions& options) {
  VLKV_RETURN_IF_ERROR(check_options(options));
  std::unique_ptr<SchedulerBackend> b(new SchedulerBackend(options));
  EngineParams p = options.engine;
  p.kv_method = options.kv_methods.front();
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  if (!e.is_ok()) return e.status();
  b->engine_ = std::move(e).value();
  for (const std::string& method : options.kv_methods) {
    Result<double> bits = b->engine_->kv_bits_per_element(method);
    if (!bits.is_ok()) return bits.status().with_context("--kv-allow '" + method + "'");
    b->bits_[method] = *bits;
  }
  SchedulerParams sp;
  sp.max_sequences = options.n_slots;
  sp.cache_budget_bytes = options.cache_budget_bytes;
  sp.cache_owner_share = options.cache_tenant_share;
  sp.shared_store = options.shared_store;
  sp.spill_store = options.spill_store;
  Result<std::unique_ptr<Scheduler>> s = Scheduler::create(*b->engine_, sp);
  if (!s.is_ok()) return s.status();
  b->scheduler_ = std::move(s).value();
  if (Status st = b->scheduler_->start(); !st.is_ok()) return st;
  return b;
}

SchedulerBackend::~SchedulerBackend() {
  shutdown(std::chrono::milliseconds(0));
  scheduler_.reset();  // its destructor may still deliver events to on_event
}

void SchedulerBackend::fail(GenerationCallbacks& callbacks, const std::string& method, Status status) {
  GenerationResult r;
  r.end = GenerationEnd::kError;
  r.status = std::move(status);
  r.kv.method = method;
  callbacks.on_done(r);
}

uint64_t SchedulerBackend::submit(GenerationRequest request, GenerationCallbacks callbacks) {
  auto job = std::make_shared<Job>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || !bits_.count(request.kv_method)) return 0;
    if (static_cast<int64_t>(jobs_.size()) >= options_.n_slots + options_.max_queue) return 0;
    job->id = next_id_++;
    jobs_[job->id] = job;
  }
  job->callbacks = std::move(callbacks);
  job->method = request.kv_method;
  job->deadline = request.deadline;
  job->submitted = Clock::now();
  auto forget = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(job->id);
  };
  // The same assembly as vlkv run and the session backend: text pieces tokenized by
  // prepare_prompt, BOS first, images encoded (here, on the HTTP thread, not the stepping one).
  // With the prefix cache, media are laid out unencoded and encoded only when no cached
  // entry (in memory, on disk, in Redis) covers them (Request::encode).
  const bool defer = options_.cache_budget_bytes > 0 && !request.prompt.media.empty();
  auto prompt = std::make_shared<const Prompt>(std::move(request.prompt));
  Result<PreparedPrompt> prepared = defer ? engine_->prepare_prompt_unencoded(*prompt, /*add_bos=*/true)
                                          : engine_->prepare_prompt(*prompt, /*add_bos=*/true);
  if (!prepared.is_ok()) {
    forget();
    fail(job->callbacks, job->method, prepared.status());
    return job->id;
  }
  Request r;
  r.prepared = std::make_shared<const PreparedPrompt>(std::move(prepared).value());
  if (defer) {
    r.encode = [engine = engine_.get(), prompt]() -> Result<std::shared_ptr<const PreparedPrompt>> {
      VLKV_ASSIGN_OR_RETURN(PreparedPrompt p, engine->prepare_prompt(*prompt, /*add_bos=*/true));
      return std::make_shared<const PreparedPrompt>(std::move(p));
    };
  }
  job->n_prompt = r.prepared->n_tokens();
  const int64_t n_ctx = engine_->params().n_ctx;
  if (job->n_prompt == 0 || job->n_prompt >= n_ctx) {
    forget();
    fail(job->callbacks, job->method,
         invalid_argument(job->n_prompt == 0 ? "the prompt is empty after tokenization"
                                             : "context full: " + std::to_string(job->n_prompt) +
                                                   " prompt tokens leave no room in the context of " +
                                                   std::to_string(n_ctx) + " (raise --ctx-size)"));
    return job->id;
  }
  r.generate = request.params;
  r.generate.max_tokens = std::min(r.generate.max_tokens, n_ctx - job->n_prompt);
  r.kv_method = request.kv_method == options_.kv_methods.front() ? "" : request.kv_method;
  r.cache_owner = request.cache_owner;
  Job* raw = job.get();
  Result<RequestId> id = scheduler_->submit(r, [this, job](const TokenEvent& ev) { return on_event(*job, ev); });
  if (!id.is_ok()) {
    forget();
    Status st = id.status();  // OutOfMemory here: it could never fit the budget, even alone
    if (st.code() == StatusCode::kOutOfMemory) st = invalid_argument(st.message() + " (even alone)");
    fail(job->callbacks, job->method, st);
    return job->id;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    raw->request = *id;
  }
  if (raw->cancelled) (void)scheduler_->cancel(*id);
  return job->id;
}

// On the scheduler's stepping thread, one event at a time per request.
bool SchedulerBackend::on_event(Job& job, const TokenEvent& ev) {
  if (!ev.finished) {
    if (job.cancelled) return false;
    if (Clock::now() >= job.deadline) {
      job.timed_out = true;
      return false;
    }
    if (job.n_generated++ == 0) job.first_token = Clock::now();
    if (!job.callbacks.on_piece(ev.piece)) return false;
    if (options_.token_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(options_.token_delay_ms));
    return true;
  }
  GenerationResult r;
  const Clock::time_point now = Clock::now();
  r.stats.n_prompt_tokens = job.n_prompt;
  r.stats.n_generated = job.n_generated;
  r.stats.n_cached_tokens = ev.n_cached_tokens;
  r.stats.stopped_at_eos = ev.reason == FinishReason::kEos;
  // Per-request times as the client sees them (batched steps have no per-request split).
  const Clock::time_point first = job.n_generated > 0 ? job.first_token : now;
  r.stats.prefill_seconds = std::chrono::duration<double>(first - job.submitted).count();
  r.stats.decode_seconds = std::chrono::duration<double>(now - first).count();
  r.kv.method = job.method;
  r.kv.bits_per_element = bits_.at(job.method);
  r.kv.held_bytes = ev.kv_held_bytes;
  r.kv.bytes_per_token = job.n_prompt + job.n_generated > 0
                             ? static_cast<double>(r.kv.held_bytes) / static_cast<double>(job.n_prompt + job.n_generated)
                             : 0;
  switch (ev.reason) {
    case FinishReason::kEos: r.end = GenerationEnd::kEndOfText; break;
    case FinishReason::kLength: r.end = GenerationEnd::kLength; break;
    case FinishReason::kStopped:
      r.end = job.timed_out ? GenerationEnd::kTimeout : job.cancelled ? GenerationEnd::kCancelled : GenerationEnd::kStopped;
      break;
    case FinishReason::kCancelled: r.end = job.timed_out ? GenerationEnd::kTimeout : GenerationEnd::kCancelled; break;
    default:
      r.end = GenerationEnd::kError;
      r.status = ev.error.is_ok() ? Status(StatusCode::kInternal, "generation failed") : ev.error;
  }
  (void)scheduler_->release(ev.id);  // finished: the scheduler may forget it
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(job.id);
  }
  job.callbacks.on_done(r);
  return true;
}

void SchedulerBackend::cancel(uint64_t id) {
  RequestId request = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    it->second->cancelled = true;
    request = it->second->request;
  }
  if (request >= 0) (void)scheduler_->cancel(request);
}

BackendLoad SchedulerBackend::load() const {
  const SchedulerStats s = scheduler_->stats();
  BackendLoad l;
  l.running = s.n_running;
  l.queued = s.n_queued;
  // One pool for every method: per method the pages its running requests hold (as the
  // sessions backend reports each method's engine), each with its own bits per element and
  // the pool's one budget. Prefix-cache entries are idle pages (evicted first): reported apart.
  l.one_pool = true;
  for (const std::string& method : options_.kv_methods) {
    const auto held = s.kv_bytes_by_method.find(method == options_.kv_methods.front() ? std::string() : method);
    l.kv.push_back({method, held == s.kv_bytes_by_method.end() ? 0 : held->second, s.kv_budget_bytes, bits_.at(method)});
  }
  static_cast<CacheStats&>(l) = s;
  return l;
}

void SchedulerBackend::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!scheduler_ || stopping_) return;
    stopping_ = true;
  }
  const Clock::time_point until = Clock::now() + grace;
  auto pending = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    return !jobs_.empty();
  };
  while (pending() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<uint64_t> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, job] : jobs_) left.push_back(id);
  }
  for (uint64_t id : left) cancel(id);
  // Cancelled requests end at the scheduler's next step (bounded: a step is one forward pass).
  const Clock::time_point hard = Clock::now() + std::chrono::seconds(10);
  while (pending() && Clock::now() < hard) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  scheduler_->stop();
}

}  // namespace vlkv::server
