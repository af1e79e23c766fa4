#include "chat/chat_line.h"

#include <cctype>
#include <string_view>

namespace vlkv::cli {
namespace {

std::string strip(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

const char* chat_help_text() {
  return "  /image PATH   attach an image to the next message\n"
         "  /video PATH   attach a video to the next message\n"
         "  /kv METHOD    evaluate the conversation again under another KV method (e.g. kivi:bits=2)\n"
         "  /save FILE    write the conversation and its KV cache to FILE (a KV file, docs/kv_file.md)\n"
         "  /load FILE    continue the conversation saved in FILE (same model, mmproj and KV method)\n"
         "  /stats        the cache: tokens, method, bits/element, bytes held\n"
         "  /clear        forget the conversation\n"
         "  /help         this list\n"
         "  /quit, /exit  leave (end of input too)\n";
}

ChatLine parse_chat_line(const std::string& raw) {
  const std::string line = strip(raw);
  if (line.empty()) return {ChatLine::Kind::kEmpty, {}};
  if (line[0] != '/') return {ChatLine::Kind::kMessage, line};
  const size_t space = line.find_first_of(" \t");
  const std::string name = line.substr(0, space);
  const std::string arg = space == std::string::npos ? std::string() : strip(std::string_view(line).substr(space));
  struct Entry {
    const char* name;
    ChatLine::Kind kind;
    const char* needs;  // what the argument is; nullptr: none taken
  };
  static constexpr Entry kCommands[] = {
      {"/image", ChatLine::Kind::kImage, "an image file"}, {"/video", ChatLine::Kind::kVideo, "a video file"},
      {"/kv", ChatLine::Kind::kKvMethod, "a KV method"},   {"/save", ChatLine::Kind::kSave, "a file"},
      {"/load", ChatLine::Kind::kLoad, "a file"},          {"/clear", ChatLine::Kind::kClear, nullptr},
      {"/stats", ChatLine::Kind::kStats, nullptr},         {"/help", ChatLine::Kind::kHelp, nullptr},
      {"/quit", ChatLine::Kind::kQuit, nullptr},           {"/exit", ChatLine::Kind::kQuit, nullptr},
  };
  for (const Entry& c : kCommands) {
    if (name != c.name) continue;
    if (c.needs && arg.empty()) return {ChatLine::Kind::kBad, name + " needs " + c.needs};
    if (!c.needs && !arg.empty()) return {ChatLine::Kind::kBad, name + " takes no argument"};
    return {c.kind, arg};
  }
  return {ChatLine::Kind::kBad, "unknown command " + name + " (/help lists them)"};
}

}  // namespace vlkv::cli
