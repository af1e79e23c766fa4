#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VLKV_CPU_RELAX() _mm_pause()
#else
#define VLKV_CPU_RELAX() std::this_thread::yield()
#endif

namespace vlkv {
namespace {

// How long an idle worker spins before sleeping on the condition variable:
// long enough to cover the gaps inside and between decode steps, short enough
// not to burn a core when the engine is idle or the machine is oversubscribed.
constexpr auto kSpinTime = std::chrono::microseconds(300);

constexpr int64_t kMaxChunks = 0xffff;  // chunk counts fit the ticket's 16-bit fields
uint64_t ticket_generation(uint64_t t) { return t >> 32; }
uint64_t ticket_limit(uint64_t t) { return (t >> 16) & 0xffff; }
uint64_t ticket_next(uint64_t t) { return t & 0xffff; }

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::parallel_for(int64_t n, const Task& fn, int64_t min_per_thread) {
  if (n <= 0) return;
  const int64_t useful = n / std::max<int64_t>(1, min_per_thread);
  const int threads = static_cast<int>(std::clamp<int64_t>(useful, 1, n_threads_));
  if (threads == 1) {
    fn(0, n, 0);
    return;
  }
  const int64_t chunk = (n + threads - 1) / threads;
  run(n, chunk, (n + chunk - 1) / chunk, /*index_by_chunk=*/true, fn);
}

void ThreadPool::parallel_for_chunked(int64_t n, int64_t grain, const Task& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>({1, grain, (n + kMaxChunks - 1) / kMaxChunks});
  const int64_t n_chunks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || n_chunks == 1) {
    fn(0, n, 0);
    return;
  }
  run(n, grain, n_chunks, /*index_by_chunk=*/false, fn);
}

void ThreadPool::parallel_for_guided(int64_t n, int64_t min_grain, int64_t align, const Task& fn) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  min_grain = std::max<int64_t>({1, min_grain, (n + kMaxChunks - 1) / kMaxChunks});
  job_bounds_.assign(1, 0);
  for (int64_t r = 0; r < n;) {
    int64_t len = std::max(min_grain, (n - r) / (4 * static_cast<int64_t>(n_threads_)));
    len = (len + align - 1) / align * align;
    r = std::min(n, r + len);
    job_bounds_.push_back(r);
  }
  const int64_t n_chunks = static_cast<int64_t>(job_bounds_.size()) - 1;
  if (n_threads_ == 1 || n_chunks == 1) {
    job_bounds_.clear();
    fn(0, n, 0);
    return;
  }
  run(n, 0, n_chunks, /*index_by_chunk=*/false, fn);
  job_bounds_.clear();
}

void ThreadPool::run(int64_t n, int64_t chunk, int64_t n_chunks, bool index_by_chunk, const Task& fn) {
  VLKV_CHECK(n_chunks <= kMaxChunks);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  job_index_by_chunk_ = index_by_chunk;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t gen = ++generation_ & 0xffffffffu;
  {
    // Under the mutex so a worker deciding to sleep cannot miss the new generation.
    std::lock_guard<std::mutex> lock(mutex_);
    ticket_.store((gen << 32) | (static_cast<uint64_t>(n_chunks) << 16), std::memory_order_release);
  }
  wake_cv_.notify_all();
  run_chunks(gen, 0);
  int spins = 0;
  while (done_.load(std::memory_order_acquire) != n_chunks) {
    if (++spins < 4096) {
      VLKV_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::run_chunks(uint64_t gen, int thread_index) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (ticket_generation(t) != gen || ticket_next(t) >= ticket_limit(t)) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Chunk c of this generation was unclaimed, so its caller is still waiting: job_ is live.
    const int64_t c = static_cast<int64_t>(ticket_next(t));
    const bool guided = !job_bounds_.empty();
    const int64_t begin = guided ? job_bounds_[static_cast<size_t>(c)] : c * job_chunk_;
    const int64_t end = guided ? job_bounds_[static_cast<size_t>(c) + 1] : std::min(job_n_, begin + job_chunk_);
    (*job_)(begin, end, job_index_by_chunk_ ? static_cast<int>(c) : thread_index);
    done_.fetch_add(1, std::memory_order_acq_rel);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto spin_start = std::chrono::steady_clock::now();
    int spins = 0;
    uint64_t gen;
    while ((gen = ticket_generation(ticket_.load(std::memory_order_acquire))) == seen) {
      if (stop_.load(std::memory_order_relaxed)) return;
      VLKV_CPU_RELAX();
      if ((++spins & 63) == 0 && std::chrono::steady_clock::now() - spin_start > kSpinTime) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_cv_.wait(lock, [&] {
          return stop_.load() || ticket_generation(ticket_.load(std::memory_order_acquire)) != seen;
        });
        spin_start = std::chrono::steady_clock::now();
      }
    }
    if (stop_.load()) return;
    seen = gen;
    run_chunks(gen, index);
  }
}

}  // namespace vlkv
