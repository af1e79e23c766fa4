// Checks a downloaded file against the hub's object id before it is moved into the cache:
// a 64-hex oid is the LFS sha256 of the content, a 40-hex one the git blob sha1
// (sha1 of "blob <size>\0" + content). A truncated or altered download never lands.
#pragma once

#include <filesystem>
#include <string>

#include "vlkv/status.h"

namespace vlkv::hub {

// ok when `oid` is empty (nothing to check against) or matches the file.
Status check_file_oid(const std::filesystem::path& file, const std::string& oid);

}  // namespace vlkv::hub
