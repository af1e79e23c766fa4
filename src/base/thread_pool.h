// A fixed pool of worker threads for data-parallel loops (matmul rows, attention
// heads). parallel_for blocks until every chunk is done; the calling thread
// works too. Not re-entrant: do not call parallel_for from inside a task.
#pragma once

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
  // one per thread (thread_index in [0, n_threads)).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

  // Default: the number of online cores.
  static int default_threads();

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace vlkv
