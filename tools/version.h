// What `vlkv --version` prints: the build's commit (cmake/git_version.cmake) and the SIMD
// tier the kernels run at on this CPU.
#pragma once

#include <string>

namespace vlkv::cli {

// "vlkv version 487 (05f595e12)\nSIMD: avx512vnni (this CPU: scalar avx2 ...; VLKV_SIMD caps it)".
std::string version_text();

}  // namespace vlkv::cli
