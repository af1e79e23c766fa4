// What identifies a GGUF file's outputs, for every cache that must not mix models: KV files
// (docs/kv_file.md), the encoder cache's and prefix cache's media digests, Redis keys.
#pragma once

#include "engine/content_hash.h"
#include "gguf/gguf_reader.h"

namespace vlkv {

// 128 bits of the SHA-256 of the file's header (metadata, tokenizer, tensor table), its
// size, and the first 4 KiB of every tensor's data (a fine-tune of the same layout differs
// there; hashing every weight would cost seconds per GB at each load). Computed once when an
// engine loads its files.
Digest128 gguf_identity(const GgufFile& g);

}  // namespace vlkv
