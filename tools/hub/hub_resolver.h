// Turns `-hf USER/REPO[:QUANT]` (plus --hf-file, --mmproj-url, --offline, the token) into local
// file paths, downloading what the cache lacks. The hub is asked as llama.cpp asks it:
//   GET <endpoint>api/models/<repo>/refs                         -> the commit of "main"
//   GET <endpoint>api/models/<repo>/tree/<commit>?recursive=true -> files, sizes, oids
//   GET <endpoint><repo>/resolve/<commit>/<path>                 -> the file (redirected to a CDN)
// <endpoint> is $MODEL_ENDPOINT, else $HF_ENDPOINT, else https://huggingface.co/. Everything the
// hub answers is untrusted: paths must stay inside the repo's folder, oids and commits are hex,
// and a download lands in the cache only once its size and hash match what the listing said.
#pragma once

#include <string>

#include "vlkv/status.h"

namespace vlkv::hub {

struct HubRequest {
  std::string repo_ref;    // USER/REPO[:QUANT]
  std::string hf_file;     // a file of the repo instead of the quant pick
  std::string token;       // empty: anonymous
  bool offline = false;    // the cache only, no network
  bool want_mmproj = true; // also fetch the repo's projector, if it has one
};

struct HubFiles {
  std::string model_path;
  std::string mmproj_path;  // empty when not wanted or the repo has none
};

std::string model_endpoint();  // with its trailing '/'

Result<HubFiles> resolve_hub_files(const HubRequest& request);

// --mmproj-url: the file at `url` in llama.cpp's cache folder (named after the URL's last
// component, its ETag in "<file>.etag" beside it), downloaded unless present and unchanged.
// `token` is sent only to the model endpoint's host.
Result<std::string> resolve_url_file(const std::string& url, const std::string& token, bool offline);

}  // namespace vlkv::hub
