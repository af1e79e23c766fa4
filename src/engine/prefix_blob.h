// Prefix-cache entries as KV file images (docs/kv_file.md), for the stores beyond this process
// (include/vlkv/prefix_store.h: Redis, --cache-dir): the same container, identity and method
// sections and KV section as a saved session, with a rows section (the entry's pass size and
// row keys) instead of the session's tokens. Read back with the same checks as a file from
// disk: checksums, model and mmproj identity, method, free budget, and rows equal to the ones
// looked up, so a blob stored under another key, corrupted or crafted is refused, never used.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/engine_impl.h"
#include "engine/prefix_cache.h"

namespace vlkv {

// The content key of an entry: hex of a SHA-256 over the text model's and mmproj's
// identities, the method spec, the pass size and the rows. Prefixed "vlkv:prefix:".
std::string prefix_entry_key(const Engine::Impl& e, const std::string& method, int64_t chunk,
                             std::span<const RowKey> rows);

// The file image of sequence seq (forward lock held), an entry of these rows.
Result<std::string> prefix_entry_image(Engine::Impl& e, SeqId seq, const std::string& method, int64_t chunk,
                                       std::span<const RowKey> rows);

// A new sequence of method from an image, refused unless it holds exactly these rows of this
// model, mmproj and method and fits the free KV budget (forward lock held).
Result<SeqId> load_prefix_entry(Engine::Impl& e, const std::string& image, const std::string& method, int64_t chunk,
                                std::span<const RowKey> rows);

}  // namespace vlkv
