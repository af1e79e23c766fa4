// report_error (commands.h), apart from main() so that the commands' library links alone
// (tests build the commands' CLI11 apps in-process).
#include <cstdio>

#include "commands.h"

namespace vlkv::cli {

int report_error(const Status& status) {
  std::fprintf(stderr, "vlkv: error: %s\n", status.message().c_str());
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kInvalidFile:
    case StatusCode::kUnsupported:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfMemory:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

}  // namespace vlkv::cli
