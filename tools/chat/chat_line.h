// One line typed into `vlkv chat`: a message or one of the commands, parsed as
// llama-mtmd-cli's chat mode does (surrounding whitespace stripped, "/image PATH" ...).
#pragma once

#include <string>

namespace vlkv::cli {

struct ChatLine {
  enum class Kind { kEmpty, kMessage, kImage, kVideo, kKvMethod, kSave, kLoad, kClear, kStats, kHelp, kQuit, kBad };
  Kind kind = Kind::kEmpty;
  std::string arg;  // the message, the path, the method spec, or (kBad) what is wrong
};

ChatLine parse_chat_line(const std::string& line);

// The commands, one per line, for /help and the banner.
const char* chat_help_text();

}  // namespace vlkv::cli
