// The lines typed into `vlkv chat`. On a terminal: line editing and history (libedit, the
// BSD readline; Up recalls earlier lines, history kept in $XDG_STATE_HOME/vlkv/chat_history,
// by default ~/.local/state/vlkv/chat_history). From a pipe: plain lines. Both take
// multi-line messages: a line ending in '\' continues on the next, and a line that is only
// """ opens a block that the next such line closes (as llama-cli's multiline input).
#pragma once

#include <optional>
#include <string>

namespace vlkv::cli {

class LineReader {
 public:
  // interactive: stdin is a terminal (editing, prompts on stderr, history kept).
  explicit LineReader(bool interactive);
  ~LineReader();  // saves the history
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next message or command, continuation lines joined with '\n'; nothing at the end of input.
  std::optional<std::string> next();

  // Where the history lives ("" when none: no home folder, or not interactive).
  const std::string& history_path() const { return history_path_; }

 private:
  std::optional<std::string> read_one(const char* prompt);

  bool interactive_;
  std::string history_path_;
};

}  // namespace vlkv::cli
