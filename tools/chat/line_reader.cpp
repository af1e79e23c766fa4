#include "chat/line_reader.h"

#include <editline/readline.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace vlkv::cli {
namespace {

constexpr int kHistoryLines = 1000;

// $XDG_STATE_HOME/vlkv/chat_history (~/.local/state when unset), folders made 0700.
std::string default_history_path() {
  std::string base;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/') {
    base = state;
  } else if (const char* home = std::getenv("HOME"); home && *home == '/') {
    base = std::string(home) + "/.local/state";
    ::mkdir((std::string(home) + "/.local").c_str(), 0700);
  } else {
    return "";
  }
  ::mkdir(base.c_str(), 0700);
  const std::string dir = base + "/vlkv";
  ::mkdir(dir.c_str(), 0700);
  return dir + "/chat_history";
}

bool ends_with_backslash(const std::string& s) { return !s.empty() && s.back() == '\\'; }

}  // namespace

LineReader::LineReader(bool interactive) : interactive_(interactive) {
  if (!interactive_) return;
  rl_outstream = stderr;  // answers alone on stdout
  using_history();
  stifle_history(kHistoryLines);
  history_path_ = default_history_path();
  if (!history_path_.empty()) read_history(history_path_.c_str());
}

LineReader::~LineReader() {
  if (history_path_.empty()) return;
  const mode_t old = ::umask(077);  // the history holds what was typed: the owner's alone
  write_history(history_path_.c_str());
  ::umask(old);
}

std::optional<std::string> LineReader::read_one(const char* prompt) {
  if (!interactive_) {
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
  }
  char* raw = readline(prompt);
  if (!raw) return std::nullopt;
  std::string line(raw);
  std::free(raw);
  return line;
}

std::optional<std::string> LineReader::next() {
  std::optional<std::string> first = read_one("> ");
  if (!first) return std::nullopt;
  std::string message;
  if (*first == "\"\"\"") {  // a block: every line up to the closing """
    bool first_line = true;
    for (;;) {
      std::optional<std::string> line = read_one(". ");
      if (!line || *line == "\"\"\"") break;
      message += (first_line ? "" : "\n") + *line;
      first_line = false;
    }
  } else {
    message = *first;
    while (ends_with_backslash(message)) {
      message.pop_back();
      std::optional<std::string> line = read_one(". ");
      if (!line) break;
      message += "\n" + *line;
    }
  }
  if (interactive_ && !message.empty()) add_history(message.c_str());
  return message;
}

}  // namespace vlkv::cli
