// One sequence's cache as bytes and back (the KV section of a KV file, docs/kv_file.md):
// its segments with their codecs, the codec blocks exactly as stored in the pages (the same
// bytes at every SIMD tier), and the method's per-layer and per-sequence state
// (LayerState::save). A method whose state cannot be saved exactly is refused by name.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_types.h"
#include "kv/page_pool.h"
#include "kv/page_table.h"
#include "vlkv/status.h"

namespace vlkv {

class ByteSink;
class Method;

// Appends seq's bytes to out. The sequence must have no uncommitted step. Unsupported
// "KV method NAME: ... cannot be saved yet" when a state of the method has no save().
Status save_sequence_cache(const SequenceCache& seq, const KvGeometry& geometry, std::string* out);
// The same bytes into a sink (a KV file section streamed to disk): the pages are not copied.
// On an error part of them may have gone to the sink (a file writer then drops the file).
Status save_sequence_cache(const SequenceCache& seq, const KvGeometry& geometry, ByteSink* out);

// Rebuilds a sequence stored with `method` from bytes save_sequence_cache wrote: everything is
// parsed and checked (geometry, counts, codecs, block sizes, state sizes) and the pages it
// needs are counted against the pool's free budget before one is taken; on any error nothing
// stays allocated. InvalidFile names what is wrong; OutOfMemory when the pages do not fit.
Status load_sequence_cache(const uint8_t* data, size_t size, const Method& method, const KvGeometry& geometry,
                           int64_t max_tokens, PagePool& pool, SequenceCache* out);

}  // namespace vlkv
