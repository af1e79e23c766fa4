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
  explicit AnswerPrinter(bool quiet) : bar_(!quiet && isatty(STDERR_FILENO)) {}

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
  // Ends the answer's line when one was started or the generation succeeded (an empty answer).
  void end(bool ok) {
    bar_.finish();
    if (printed_ || ok) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
  }

 private:
  ProgressBar bar_;
  bool printed_ = false;
};

}  // namespace vlkv::cli
