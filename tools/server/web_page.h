// The chat page `vlkv serve` answers at GET / (its files are in tools/web/), compiled into
// the binary at build time by cmake/embed_web.cmake: the server works offline and needs
// no file next to it. See docs/web_page.md.
#pragma once

#include <cstddef>
#include <string_view>

namespace vlkv::server {

struct WebAsset {
  std::string_view path;          // "/index.html", "/chat.js", ...
  std::string_view content_type;
  std::string_view body;          // static storage
};

// The generated table (build/.../web_assets.cpp).
extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

// The file served at path ("/" is "/index.html"); nullptr if there is none.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace vlkv::server
