#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

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

void run_chunk(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int index, int n_threads) {
  const int64_t chunk = (n + n_threads - 1) / n_threads;
  const int64_t begin = std::min<int64_t>(n, chunk * index);
  const int64_t end = std::min<int64_t>(n, begin + chunk);
  if (begin < end) fn(begin, end, index);
}

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

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                              int64_t min_per_thread) {
  if (n <= 0) return;
  const int64_t useful = n / std::max<int64_t>(1, min_per_thread);
  const int threads = static_cast<int>(std::clamp<int64_t>(useful, 1, n_threads_));
  if (threads == 1) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_threads_ = threads;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the mutex so a worker deciding to sleep cannot miss the new generation.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  run_chunk(fn, n, 0, threads);
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < 4096) {
      VLKV_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto spin_start = std::chrono::steady_clock::now();
    int spins = 0;
    uint64_t gen;
    while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
      if (stop_.load(std::memory_order_relaxed)) return;
      VLKV_CPU_RELAX();
      if ((++spins & 63) == 0 && std::chrono::steady_clock::now() - spin_start > kSpinTime) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_cv_.wait(lock, [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
        spin_start = std::chrono::steady_clock::now();
      }
    }
    if (stop_.load()) return;
    seen = gen;
    if (index < job_threads_) run_chunk(*job_, job_n_, index, job_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace vlkv
