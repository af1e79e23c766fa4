#include "hub/hub_repo_ref.h"

namespace vlkv::hub {
namespace {

bool is_word_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

bool is_valid_repo_id(std::string_view repo) {
  if (repo.empty() || repo.size() > 256) return false;
  int slashes = 0;
  bool after_separator = true;  // a separator may not start the id or follow another
  for (char c : repo) {
    if (is_word_char(c)) {
      after_separator = false;
    } else if (c == '/' || c == '.' || c == '-') {
      if (after_separator) return false;
      slashes += c == '/';
      after_separator = true;
    } else {
      return false;
    }
  }
  return !after_separator && slashes == 1;
}

Result<HubRepoRef> parse_hub_repo_ref(std::string_view text) {
  const std::string shown(text.substr(0, 300));
  const std::string expected = "expected USER/REPO[:QUANT], e.g. ggml-org/Qwen2.5-VL-3B-Instruct-GGUF:Q4_K_M";
  if (text.empty()) return invalid_argument("--hf-repo needs a value: " + expected);
  HubRepoRef ref;
  const size_t colon = text.find(':');
  ref.repo = std::string(text.substr(0, colon));
  if (colon != std::string_view::npos) {
    ref.quant = std::string(text.substr(colon + 1));
    bool ok = !ref.quant.empty() && ref.quant.size() <= 64;
    for (char c : ref.quant) ok = ok && is_word_char(c);
    if (!ok) return invalid_argument("--hf-repo '" + shown + "': bad quant tag: " + expected);
  }
  if (!is_valid_repo_id(ref.repo)) return invalid_argument("--hf-repo '" + shown + "': " + expected);
  return ref;
}

}  // namespace vlkv::hub
