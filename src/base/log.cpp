#include "base/log.h"

#include <atomic>
#include <cstdio>

namespace vlkv {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
}

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log_message(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) > g_level.load()) return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(stderr, fmt, args);
  va_end(args);
  std::fputc('\n', stderr);
}

}  // namespace vlkv
