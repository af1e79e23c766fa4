// Progress of long steps (encoding many video frames, long prefills) on stderr: on a terminal a
// one-line bar redrawn in place, elsewhere (a log) a plain line every few seconds for the long
// ingests that ask for it. A prefill's line has its tokens per second and the time left, and
// the frames fed when a video is streamed ("frames" updates ride on it). Silent when disabled
// (--quiet), and a bar stays hidden for steps that finish before it would be worth showing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace vlkv::cli {

class ProgressBar {
 public:
  enum class Mode { kOff, kBar, kLines };
  explicit ProgressBar(bool enabled) : mode_(enabled ? Mode::kBar : Mode::kOff), start_(Clock::now()) {}
  ~ProgressBar() { finish(); }

  // kLines: a line at most every interval_s seconds (where stderr is no terminal).
  void set_mode(Mode mode, double interval_s = 10) {
    finish();
    mode_ = mode;
    interval_ = std::chrono::duration<double>(interval_s);
  }

  void update(const char* stage, int64_t done, int64_t total) {
    if (mode_ == Mode::kOff || total <= 0) return;
    if (std::strcmp(stage, "frames") == 0) {  // shown on the prefill's next line
      frames_done_ = done;
      frames_total_ = total;
      return;
    }
    const auto now = Clock::now();
    if (stage_ != stage) {  // a new step: its rate counts from here
      stage_ = stage;
      rate_from_ = now;
      rate_done_ = done;
    }
    if (mode_ == Mode::kLines) {
      if (last_ == Clock::time_point{}) last_ = now;  // the first line one interval after the first update
      if (now - last_ < interval_) return;
      last_ = now;
      std::fprintf(stderr, "vlkv: %s %lld/%lld%s\n", stage, static_cast<long long>(done), static_cast<long long>(total),
                   figures(now, done, total).c_str());
      std::fflush(stderr);
      return;
    }
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
    const std::string line = figures(now, done, total);
    std::fprintf(stderr, "\r%-8s [%s] %lld/%lld%s", stage, bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), line.c_str());
    width_ = std::max(width_, 50 + line.size());
    std::fflush(stderr);
  }

  // Clears the line (before the answer or an error is printed).
  void finish() {
    if (!shown_) return;
    std::fprintf(stderr, "\r%*s\r", static_cast<int>(width_), "");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;

  // ", frame F/N, R tok/s, ETA T" where known (a prefill's rate is of its tokens).
  std::string figures(Clock::time_point now, int64_t done, int64_t total) const {
    std::string s;
    char buf[96];
    if (frames_total_ > 0) {
      std::snprintf(buf, sizeof buf, ", frame %lld/%lld", static_cast<long long>(frames_done_),
                    static_cast<long long>(frames_total_));
      s += buf;
    }
    const double seconds = std::chrono::duration<double>(now - rate_from_).count();
    if (stage_ == "prefill" && seconds > 0.2 && done > rate_done_) {
      const double rate = static_cast<double>(done - rate_done_) / seconds;
      const auto left = static_cast<long long>(static_cast<double>(total - done) / rate + 0.5);
      std::snprintf(buf, sizeof buf, ", %.0f tok/s, ETA %lld:%02lld", rate, left / 60, left % 60);
      s += buf;
    }
    return s;
  }

  Mode mode_;
  std::chrono::duration<double> interval_{10};
  bool shown_ = false;
  Clock::time_point start_;
  Clock::time_point last_{};
  std::string stage_;
  Clock::time_point rate_from_{};
  int64_t rate_done_ = 0;
  int64_t frames_done_ = 0, frames_total_ = 0;
  size_t width_ = 60;
};

}  // namespace vlkv::cli
