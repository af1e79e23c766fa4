// What the Scheduler keys and cuts prefix-cache entries by (prefix_cache.h): a prompt
// layout's row keys, and the forward passes a request alone feeds its prompt in.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/decoder_feed.h"
#include "engine/prefix_cache.h"

namespace vlkv {

// One key per row of layout, as far as the rows can be keyed by content: text rows by
// token id; media rows by their chunk's digest (PromptChunk::content_*) and index, and by
// their visual-text similarity bits when with_similarity (methods that read it store other bits
// for other following text). Stops before the first media chunk without a digest.
// prepared: the prompt the layout was built from (null: a token list, all text); its salt
// (PreparedPrompt::salt_*) mixed into every key.
std::vector<RowKey> prompt_row_keys(const PreparedPrompt* prepared, const PromptLayout& layout, bool with_similarity);

// The forward passes a request alone feeds its prompt in: each segment on its own, a
// non-causal one whole, the others in passes of `chunk` rows (the last one shorter).
// Their sizes in order. An entry cut at the end of one of these passes holds exactly what
// a request feeding the same rows this way stores there.
std::vector<int64_t> canonical_feeds(const PromptLayout& layout, int64_t chunk);

}  // namespace vlkv
