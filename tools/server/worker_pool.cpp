#include "server/worker_pool.h"

namespace vlkv::server {

WorkerPool::WorkerPool(int n) {
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::post(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return;
  jobs_.push_back(std::move(job));
  if (!idle_.empty()) {
    Idle* warmest = idle_.back();
    idle_.pop_back();
    warmest->woken = true;
    warmest->cv.notify_one();
  }
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    for (Idle* w : idle_) {
      w->woken = true;
      w->cv.notify_one();
    }
    idle_.clear();
  }
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void WorkerPool::loop() {
  Idle self;
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (jobs_.empty() && !stopped_) {
        self.woken = false;
        idle_.push_back(&self);
        self.cv.wait(lock, [&] { return self.woken; });
      }
      if (jobs_.empty()) return;  // stopped, nothing left to run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace vlkv::server
