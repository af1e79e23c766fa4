// Diagnostics to stderr. stdout is reserved for generated text and reports.
#pragma once

#include <cstdarg>

namespace vlkv {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace vlkv

#define VLKV_LOG_INFO(...) ::vlkv::log_message(::vlkv::LogLevel::kInfo, __VA_ARGS__)
#define VLKV_LOG_WARN(...) ::vlkv::log_message(::vlkv::LogLevel::kWarn, __VA_ARGS__)
#define VLKV_LOG_DEBUG(...) ::vlkv::log_message(::vlkv::LogLevel::kDebug, __VA_ARGS__)
