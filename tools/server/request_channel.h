// One request's hand-off between the backend thread that generates it and the HTTP
// thread that answers it: text released by the TextStream (stop strings, whole UTF-8
// characters), then the result. Thread safe; shared by both sides (shared_ptr).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "server/generation_backend.h"
#include "server/text_stream.h"
#include "server/token_logprobs.h"

namespace vlkv::server {

class RequestChannel {
 public:
  explicit RequestChannel(std::vector<std::string> stop) : stream_(std::move(stop)) {}

  // Backend side. push: false once a stop string appeared or the client is gone.
  bool push(const std::string& piece) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abandoned_) return false;
    pending_ += stream_.feed(piece);
    cv_.notify_all();
    return !stream_.stopped();
  }
  // The logprobs of the token whose piece is pushed next (requests that asked for them).
  void add_logprobs(StepLogprobs step) {
    std::lock_guard<std::mutex> lock(mutex_);
    logprobs_.push_back(std::move(step));
  }
  void finish(const GenerationResult& result) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ += stream_.finish();
    result_ = result;
    if (stream_.stopped() && result_.end == GenerationEnd::kStopped) result_.end = GenerationEnd::kEndOfText;
    done_ = true;
    cv_.notify_all();
  }

  // HTTP side: waits until there is text or the result (or timeout), then takes the text.
  // Returns true once done (result() is final). logprobs (when given) receives those added since.
  bool wait_take(std::string* text, std::chrono::milliseconds timeout, std::vector<StepLogprobs>* logprobs = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
    text->append(pending_);
    pending_.clear();
    if (logprobs) {
      logprobs->insert(logprobs->end(), logprobs_.begin(), logprobs_.end());
      logprobs_.clear();
    }
    return done_;
  }
  // Waits up to timeout for text or the result, leaving the text for wait_take; true once
  // either is there.
  bool wait_started(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
  }
  bool done() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  bool has_text() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return !pending_.empty();
  }
  const GenerationResult& result() const { return result_; }  // only after done
  // The client is gone: further pushes stop the generation.
  void abandon() {
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  TextStream stream_;
  std::string pending_;
  std::vector<StepLogprobs> logprobs_;
  GenerationResult result_;
  bool done_ = false;
  bool abandoned_ = false;
};

}  // namespace vlkv::server
