// VLKV_CHECK: for broken invariants (programming errors) only. Aborts with
// file, line and message. Recoverable failures return vlkv::Status instead.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace vlkv::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* expr, const char* msg) {
  std::fprintf(stderr, "vlkv: internal check failed at %s:%d: %s%s%s\n", file, line, expr,
               msg[0] ? " — " : "", msg);
  std::abort();
}
}  // namespace vlkv::detail

#define VLKV_CHECK(cond) \
  do { if (!(cond)) ::vlkv::detail::check_failed(__FILE__, __LINE__, #cond, ""); } while (0)
#define VLKV_CHECK_MSG(cond, msg) \
  do { if (!(cond)) ::vlkv::detail::check_failed(__FILE__, __LINE__, #cond, (msg)); } while (0)
