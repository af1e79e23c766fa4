#pragma once
// Threads that run HTTP handlers. The most recently idle thread takes the next job (LIFO):
// sequential requests run on the same warm thread, so only as many threads (and glibc malloc
// arenas, up to 8 per core) as requests ever ran *at once* hold memory. With a shared FIFO
// wake-up every one of the ~70 threads took turns, and each arena kept a freed multi-MiB body
// as free-but-resident memory: +23 MiB of RSS over the first ~25 large requests on one
// keep-alive connection, +3 MiB with LIFO (tests/tools/serve_token_budget_test.cpp; the
// listener also trims free memory after large bodies, see http_listener.cpp).
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace vlkv::server {

class WorkerPool {
 public:
  explicit WorkerPool(int n);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::function<void()> job);
  // Runs the jobs already queued, then joins.
  void stop();

 private:
  struct Idle {  // one waiting thread's own wake-up, so post() can choose which thread runs
    std::condition_variable cv;
    bool woken = false;
  };
  void loop();

  std::mutex mutex_;
  std::deque<std::function<void()>> jobs_;
  std::vector<Idle*> idle_;  // a stack: back() went idle last
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace vlkv::server
