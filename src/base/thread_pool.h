// A fixed pool of worker threads for data-parallel loops (matmul rows, attention
// heads). parallel_for blocks until every chunk is done; the calling thread
// works too. Workers spin briefly between jobs before sleeping, because a decode
// step issues hundreds of short parallel loops and a futex wake-up per loop
// would cost more than the loop itself. Not re-entrant: do not call
// parallel_for from inside a task, nor from two threads at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vlkv {

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads == 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over [0, n) split into contiguous chunks,
  // one per thread (thread_index in [0, n_threads)). min_per_thread is the
  // smallest chunk worth a thread: small loops run on fewer threads (or inline),
  // since waking a thread costs about as much as a few thousand multiply-adds.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t min_per_thread = 1);

  // Default: the number of online cores.
  static int default_threads();

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job; written by parallel_for before generation_ is bumped (release),
  // read by workers after they observe the new generation (acquire).
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_threads_ = 0;          // threads sharing the current job (<= n_threads_)
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current job
  std::atomic<bool> stop_{false};
  std::mutex mutex_;             // only for sleeping workers
  std::condition_variable wake_cv_;
};

}  // namespace vlkv
