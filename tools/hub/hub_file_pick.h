// Which files of a repo `-hf USER/REPO[:QUANT]` means, picked as llama.cpp picks them:
// - the model: a .gguf whose name does not say mmproj/imatrix/mtp-/eagle3-/dflash-/dspark-,
//   matching "<QUANT>." or "<QUANT>-" (case-insensitive); with no QUANT, Q4_K_M, then Q8_0,
//   then the first model GGUF; of a split model, its first part.
// - the projector (mmproj): a .gguf with "mmproj" in its path, in the model's folder or one
//   above it, the deepest such folder first, then the quant bits closest to the model's.
#pragma once

#include <string>
#include <vector>

#include "hub/hub_cache.h"

namespace vlkv::hub {

// nullptr when no file matches.
const RepoFile* pick_model_file(const std::vector<RepoFile>& files, const std::string& quant);
const RepoFile* pick_mmproj_file(const std::vector<RepoFile>& files, const std::string& model_path);
const RepoFile* find_file(const std::vector<RepoFile>& files, const std::string& path);

// "Q4_K_M" from "x-Q4_K_M.gguf" or "x.Q4_K_M-00001-of-00002.gguf" (upper case); empty if none.
std::string quant_tag_of(const std::string& path);
// "x-00001-of-00003.gguf" -> 3; 1 for a single file.
int split_count_of(const std::string& path);
// The repo's GGUF files, for error messages: "a.gguf (Q4_K_M), b.gguf (Q8_0), ...".
std::string list_gguf_files(const std::vector<RepoFile>& files);

}  // namespace vlkv::hub
