// Row keys and canonical feeds for the prefix cache.
#include "engine/prefix_keys.h"

#include <cstring>

namespace vlkv {

namespace {
constexpr uint64_t kTextRow = 0x7465787420726f77ull;  // "text row": media keys are SHA-256 bits
}  // namespace

std::vector<RowKey> prompt_row_keys(const PreparedPrompt* prepared, const PromptLayout& layout, bool with_similarity) {
  std::vector<RowKey> keys;
  keys.reserve(static_cast<size_t>(layout.n_rows()));
  // lay_out_prompt makes one segment per non-empty chunk, in order.
  std::vector<const PromptChunk*> chunks;
  if (prepared)
    for (const PromptChunk& c : prepared->chunks)
      if (c.n_tokens > 0) chunks.push_back(&c);
  for (size_t s = 0; s < layout.segments.size(); ++s) {
    const FeedSegment& sg = layout.segments[s];
    if (!sg.media) {
      for (int64_t r = sg.begin; r < sg.end; ++r)
        keys.push_back(RowKey{kTextRow, static_cast<uint64_t>(static_cast<uint32_t>(layout.tokens[r]))});
      continue;
    }
    const PromptChunk* c = s < chunks.size() ? chunks[s] : nullptr;
    if (!c || c->kind != PromptChunk::Kind::kMedia || (c->content_hi == 0 && c->content_lo == 0) ||
        c->n_tokens != sg.end - sg.begin)
      break;  // not keyed by content: nothing from here on is cached
    for (int64_t r = sg.begin; r < sg.end; ++r) {
      const uint64_t i = static_cast<uint64_t>(r - sg.begin);
      uint64_t b = c->content_lo ^ (i * 0x9e3779b97f4a7c15ull);
      if (with_similarity && !sg.similarity.empty()) {
        uint32_t bits = 0;
        std::memcpy(&bits, &sg.similarity[static_cast<size_t>(i)], sizeof bits);
        b ^= static_cast<uint64_t>(bits) << 32 | bits;
        b = b * 0xff51afd7ed558ccdull + 1;
      }
      keys.push_back(RowKey{c->content_hi, b});
    }
  }
  // A salted prompt's rows (Prompt::cache_salt): its text rows differ from every other
  // salt's (its media rows do already, by their salted digests).
  if (prepared && (prepared->salt_hi != 0 || prepared->salt_lo != 0))
    for (RowKey& k : keys) k = RowKey{k.a ^ prepared->salt_hi, k.b ^ prepared->salt_lo};
  return keys;
}

std::vector<int64_t> canonical_feeds(const PromptLayout& layout, int64_t chunk) {
  std::vector<int64_t> sizes;
  for (const FeedSegment& sg : layout.segments) {
    if (sg.non_causal) {
      sizes.push_back(sg.end - sg.begin);
      continue;
    }
    for (int64_t r = sg.begin; r < sg.end; r += chunk) sizes.push_back(std::min(chunk, sg.end - r));
  }
  return sizes;
}

}  // namespace vlkv
