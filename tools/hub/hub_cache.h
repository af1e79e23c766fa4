// The on-disk cache that llama.cpp's -hf shares with the Hugging Face tools (the hub's
// "local cache" layout), so a file llama.cpp downloaded is used as is and vice versa:
//
//   <cache>/models--OWNER--NAME/refs/main                 the commit "main" pointed at (40 hex)
//   <cache>/models--OWNER--NAME/blobs/<oid>               file contents, named by LFS sha256 / git oid
//   <cache>/models--OWNER--NAME/snapshots/<commit>/<path> relative symlink to ../../blobs/<oid>
//
// <cache> is the first set of $LLAMA_CACHE, $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub,
// $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub (llama.cpp's order).
// Plain URLs (--mmproj-url) go to llama.cpp's own cache folder instead: $LLAMA_CACHE, else
// $XDG_CACHE_HOME/llama.cpp, else ~/.cache/llama.cpp, named after the URL's last component.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "vlkv/status.h"

namespace vlkv::hub {

// One file of a repo snapshot, from the hub's tree API or from the cache.
struct RepoFile {
  std::string path;    // inside the repo, '/'-separated, checked to stay inside it
  std::string oid;     // LFS sha256 (64 hex) or git blob sha1 (40 hex); may be empty
  int64_t size = -1;   // bytes, when the hub said
};

Result<std::filesystem::path> hub_cache_dir();
Result<std::filesystem::path> url_cache_dir();

// models--OWNER--NAME under the hub cache.
std::filesystem::path repo_cache_dir(const std::filesystem::path& cache, const std::string& repo);

bool is_hex(const std::string& s, size_t length);
// A relative '/'-path without "..", ".", empty or absolute parts: safe to join under a folder.
bool is_safe_relative_path(const std::string& path);

// Writes refs/<branch> (atomically). The branch must be one safe path component.
Status write_ref(const std::filesystem::path& repo_dir, const std::string& branch, const std::string& commit);
// refs/main, else another valid ref; empty when none.
std::string read_cached_commit(const std::filesystem::path& repo_dir);
// The files of snapshots/<commit> (links or plain files whose target exists), sorted by path.
std::vector<RepoFile> cached_snapshot_files(const std::filesystem::path& repo_dir, const std::string& commit);

// Where a file of `commit` lives: snapshots/<commit>/<path>.
std::filesystem::path snapshot_path(const std::filesystem::path& repo_dir, const std::string& commit,
                                    const std::string& path);
// Where its content is downloaded to: blobs/<oid> (or the snapshot path itself when the hub gave
// no oid, as llama.cpp does).
std::filesystem::path download_path(const std::filesystem::path& repo_dir, const std::string& commit,
                                    const RepoFile& file);
// Points snapshots/<commit>/<path> at the downloaded blob (a relative symlink; a move where the
// file system has no symlinks). Nothing to do when the snapshot entry exists already.
Status link_snapshot(const std::filesystem::path& blob, const std::filesystem::path& snapshot);

}  // namespace vlkv::hub
