// A one-line progress bar on stderr for long steps (encoding many video frames,
// long prefills). Silent when disabled (stderr is not a terminal, or --quiet),
// and it stays hidden for steps that finish before it would be worth showing.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace vlkv::cli {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), start_(Clock::now()) {}
  ~ProgressBar() { finish(); }

  void update(const char* stage, int64_t done, int64_t total) {
    if (!enabled_ || total <= 0) return;
    const auto now = Clock::now();
    // Only steps that take a while get a bar; redraw at most every 50 ms.
    if (!shown_ && now - start_ < std::chrono::milliseconds(300) && done < total) return;
    if (shown_ && done < total && now - last_ < std::chrono::milliseconds(50)) return;
    if (!shown_ && done >= total && now - start_ < std::chrono::milliseconds(300)) return;
    last_ = now;
    shown_ = true;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\r%-8s [%s] %lld/%lld", stage, bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total));
    std::fflush(stderr);
  }

  // Clears the line (before the answer or an error is printed).
  void finish() {
    if (!shown_) return;
    std::fprintf(stderr, "\r%60s\r", "");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool shown_ = false;
  Clock::time_point start_;
  Clock::time_point last_{};
};

}  // namespace vlkv::cli
