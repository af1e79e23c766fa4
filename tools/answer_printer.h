// Streams an answer's bytes to stdout as they are generated, with the progress bar of the
// steps before the first one on stderr (vlkv run, vlkv chat).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

#include "progress_bar.h"
#include "vlkv/engine.h"

namespace vlkv::cli {

class AnswerPrinter {
 public:
  explicit AnswerPrinter(bool quiet) : quiet_(quiet), bar_(!quiet && isatty(STDERR_FILENO)) {}

  // A long step's progress where stderr is no terminal (a log): a line every interval_s seconds.
  void progress_lines(double interval_s) {
    if (!quiet_ && !isatty(STDERR_FILENO)) bar_.set_mode(ProgressBar::Mode::kLines, interval_s);
  }

  // on_piece for Session::generate and Conversation::ask.
  std::function<bool(const std::string&)> on_piece() {
    return [this](const std::string& piece) {
      bar_.finish();
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      printed_ = true;
      return true;
    };
  }
  ProgressCallback on_progress() {
    return [this](const char* stage, int64_t done, int64_t total) { bar_.update(stage, done, total); };
  }
  // A line of its own on stderr (the bar, if shown, is cleared first and redrawn later).
  void note(const std::string& line) {
    bar_.finish();
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
  // Ends the answer's line when one was started or the generation succeeded (an empty answer).
  void end(bool ok) {
    bar_.finish();
    if (printed_ || ok) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
  }

 private:
  bool quiet_;
  ProgressBar bar_;
  bool printed_ = false;
};

}  // namespace vlkv::cli
