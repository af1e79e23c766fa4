#include "server/web_page.h"

namespace vlkv::server {

const WebAsset* find_web_asset(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (size_t i = 0; i < kWebAssetCount; ++i)
    if (kWebAssets[i].path == path) return &kWebAssets[i];
  return nullptr;
}

}  // namespace vlkv::server
