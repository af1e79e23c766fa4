// HTTP for the model hub, through libcurl: small JSON GETs (the hub API) and resumable file
// downloads. Redirects are followed (the hub sends file downloads to a CDN); libcurl drops the
// Authorization header when a redirect leaves the host, so the token stays with the hub.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "vlkv/status.h"

namespace vlkv::hub {

struct HttpReply {
  long status = 0;              // 0: no HTTP answer (see transport_error)
  std::string transport_error;  // why no answer came: DNS, refused, timeout...
  std::string body;             // at most max_body bytes
  std::string etag;
};

// GET (or HEAD) `url` with "Authorization: Bearer <token>" when a token is given.
HttpReply http_get(const std::string& url, const std::string& token, size_t max_body, bool head_only = false);

struct DownloadSpec {
  std::string url;
  std::filesystem::path dest;  // written as dest + ".downloadInProgress", renamed when complete
  std::string token;
  int64_t expected_size = -1;  // checked before the rename when >= 0
  std::string oid;             // checked (sha256 / git sha1) before the rename when set
  std::string label;           // for messages: "owner/repo/file.gguf"
  int max_attempts = 3;        // a cut transfer is resumed with a Range request
};

// Downloads `spec.url` to `spec.dest`, resuming a partial file left by an earlier try (by vlkv or
// llama.cpp). Returns the server's ETag through `etag` when it sent one.
Status download_file(const DownloadSpec& spec, std::string* etag = nullptr);

// "401 from <url>": the one-line messages shared by the API calls and downloads.
Status http_error(const std::string& what, long status, const std::string& body);

// The token must be printable ASCII without spaces (it goes into a header).
Status check_token(const std::string& token);

}  // namespace vlkv::hub
