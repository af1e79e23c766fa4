// `-hf USER/REPO[:QUANT]` as llama.cpp reads it: a Hugging Face model repository and an
// optional quant tag (case-insensitive, e.g. Q4_K_M) that picks one GGUF file of the repo.
#pragma once

#include <string>
#include <string_view>

#include "vlkv/status.h"

namespace vlkv::hub {

struct HubRepoRef {
  std::string repo;   // "owner/name"
  std::string quant;  // empty: llama.cpp's default pick (Q4_K_M, then Q8_0, then the first GGUF)
};

// A repo id as the hub names them: [A-Za-z0-9_] with single '.', '-' or '/' between them,
// exactly one '/', at most 256 characters. It becomes a cache folder name, so nothing else passes.
bool is_valid_repo_id(std::string_view repo);

// Refuses anything but USER/REPO or USER/REPO:QUANT (QUANT: [A-Za-z0-9_]+) with a one-line message.
Result<HubRepoRef> parse_hub_repo_ref(std::string_view text);

}  // namespace vlkv::hub
