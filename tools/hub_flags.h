// The model-download flags shared by run, chat, serve, bench and eval, spelled as llama.cpp
// spells them: -hf/--hf-repo USER/REPO[:QUANT], --hf-file, --hf-token, --mmproj-url, --offline,
// --no-mmproj. One call adds them to a command; wrapping its action with
// run_after_hub_download resolves them to local --model/--mmproj paths before the command runs.
//
// CLI11 (2.1) takes no multi-letter name after one dash: main() spells -hf, -hfr, -hff, -hft
// and -mmu out as their long names before parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "vlkv/status.h"

namespace vlkv::cli {

struct HubFlags {
  std::string repo;        // --hf-repo
  std::string file;        // --hf-file
  std::string token;       // --hf-token, else $HF_TOKEN
  std::string mmproj_url;  // --mmproj-url
  bool offline = false;
  bool no_mmproj = false;
  CLI::Option* repo_option = nullptr;
  bool model_required = false;  // the command had made --model required
  std::string* model_path = nullptr;
  std::string* mmproj_path = nullptr;

  // Fills *model_path / *mmproj_path from the flags (downloading what the cache lacks).
  Status resolve();
};

// Adds the flags to `app`; model_path and mmproj_path are the command's -m and --mmproj values
// and must outlive the command (they live in its options object).
std::shared_ptr<HubFlags> add_hub_flags(CLI::App& app, std::string& model_path, std::string& mmproj_path);

// The command's action, preceded by hub->resolve(): a failure is reported (one line) and its
// exit status returned without running the command.
std::function<int()> run_after_hub_download(std::shared_ptr<HubFlags> hub, std::function<int()> run);

}  // namespace vlkv::cli
