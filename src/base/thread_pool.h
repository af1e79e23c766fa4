// A fixed pool of worker threads for data-parallel loops (matmul rows, attention
// heads). A loop is cut into chunks that any thread claims from one atomic ticket, so
// when a worker is preempted or still asleep (a shared, oversubscribed machine) the
// caller runs its chunk instead of waiting for it. Workers spin briefly between jobs
// before sleeping, because a decode step issues hundreds of short parallel loops and
// a futex wake-up per loop would cost more than the loop itself. Not re-entrant: do
// not call parallel_for from inside a task, nor from two threads at once.
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
  using Task = std::function<void(int64_t begin, int64_t end, int thread_index)>;

  // n_threads counts the caller: n_threads == 1 runs everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) over [0, n) split into contiguous chunks, one
  // per thread. thread_index is in [0, n_threads) and no two concurrent calls share
  // one (per-thread scratch is safe). min_per_thread is the smallest chunk worth a
  // thread: small loops run on fewer threads (or inline), since waking a thread costs
  // about as much as a few thousand multiply-adds.
  void parallel_for(int64_t n, const Task& fn, int64_t min_per_thread = 1);

  // As parallel_for, in chunks of `grain` (the last may be shorter) handed to whichever
  // thread is free, so a thread that stalls holds up at most one chunk. A thread may
  // get several calls; with one thread, fn runs once over [0, n). Used for long loops of
  // equal-cost items (matvec rows).
  void parallel_for_chunked(int64_t n, int64_t grain, const Task& fn);

  // As parallel_for_chunked, in chunks that shrink as the loop drains (guided scheduling):
  // each is 1/(4 n_threads) of the items left, rounded up to a multiple of `align`, at least
  // min_grain. Big first chunks keep the claims few; small last ones leave the threads little
  // to wait for at the end (the imbalance of equal chunks is up to one chunk per loop).
  void parallel_for_guided(int64_t n, int64_t min_grain, int64_t align, const Task& fn);

  // Default: the number of online cores.
  static int default_threads();

 private:
  void run(int64_t n, int64_t chunk, int64_t n_chunks, bool index_by_chunk, const Task& fn);
  // Claims and runs chunks of generation `gen` until none is left; false if none was claimed.
  void run_chunks(uint64_t gen, int thread_index);
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job; written by the caller before it publishes the ticket (release),
  // read by a thread only after it claimed a chunk of that job (so never a stale job).
  const Task* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;         // items per chunk (when job_bounds_ is empty)
  std::vector<int64_t> job_bounds_;  // guided jobs: chunk c is [job_bounds_[c], job_bounds_[c + 1])
  bool job_index_by_chunk_ = false;
  uint64_t generation_ = 0;       // caller-side copy of the ticket's generation
  // (generation << 32) | (n_chunks << 16) | next chunk: one word, so a claim checks
  // generation and bounds with one compare-and-swap.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int64_t> done_{0};  // chunks finished in the current job
  std::atomic<bool> stop_{false};
  std::mutex mutex_;              // only for sleeping workers
  std::condition_variable wake_cv_;
};

}  // namespace vlkv
