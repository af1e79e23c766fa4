// The one way the engine feeds its decoder: a prompt (token ids, or a prepared prompt's text
// and media chunks) or a generated token laid out as decoder rows — token kinds, RoPE and
// M-RoPE positions, visual-text similarities, Gemma 3's non-causal media — for Session and Scheduler.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine_impl.h"
#include "text/decoder.h"

namespace vlkv {

// A run of prompt rows of one input kind (text ids, or one media item's embeddings): a
// forward pass never crosses one, as libmtmd feeds a chunk at a time.
struct FeedSegment {
  int64_t begin = 0, end = 0;         // row range in the layout
  const float* embeddings = nullptr;  // media: [end - begin, n_embd_inp] (not owned); null for text
  std::vector<int64_t> mrope;         // Qwen2-VL/Qwen3-VL media: [end - begin, 3] (t, h, w) positions
  std::vector<float> similarity;      // media when asked for: [end - begin] visual-text similarities, else empty
  bool non_causal = false;            // Gemma 3 media: its rows see each other, fed whole in one step
  // Media rows (embeddings null: not encoded yet, lay_out_prompt's allow_unencoded; such rows
  // can be keyed and counted but not fed, or fed from a StreamedMediaEncoder).
  bool media = false;
  int64_t chunk = -1;  // media: the PreparedPrompt chunk the rows come from
};

// Every row of a prompt, in order. Media rows point into the PreparedPrompt the layout was
// built from: keep it alive while feeding.
struct PromptLayout {
  std::vector<int32_t> tokens;        // [n_rows] ids (0 where a media token stands)
  std::vector<int64_t> positions;     // [n_rows] RoPE positions
  std::vector<TokenKind> kinds;       // [n_rows]
  std::vector<FeedSegment> segments;  // in order, covering [0, n_rows)
  int64_t next_pos = 0;               // position of the token after the prompt
  int64_t n_embd_inp = 0;             // width of a media row (TextHparams::n_embd_inp)

  int64_t n_rows() const { return static_cast<int64_t>(tokens.size()); }
  // The segment holding row i, or null past the prompt.
  const FeedSegment* segment_at(int64_t i) const;
  // Rows [begin, begin + n) as decoder input: views into this layout. The range must lie in
  // one segment (checked).
  DecoderInput rows(int64_t begin, int64_t n) const;
  // The same within segment sg (one of this layout's, holding the range) with its media rows
  // given: `embeddings` ([rows of the segment, n_embd_inp]; an unencoded segment's, e.g. from a
  // StreamedMediaEncoder) and `similarity` (may be null).
  DecoderInput rows(const FeedSegment& sg, int64_t begin, int64_t n, const float* embeddings,
                    const float* similarity) const;
};

// InvalidArgument naming the first id outside [0, n_vocab) (the decoder's own message).
Status check_token_ids(std::span<const int32_t> tokens, int64_t n_vocab);

// Token ids as text rows at positions start_pos.. (all kText, as a plain token list is fed).
PromptLayout lay_out_tokens(std::span<const int32_t> tokens, int64_t start_pos);

// A prepared prompt from start_pos: control tokens kSpecial, other text kText, media kVisual
// with their embeddings; Qwen2-VL/Qwen3-VL media at M-RoPE positions from their grid
// (advancing the text position by the grid's extent, not its token count); Gemma 3 media
// non-causal (refused when longer than n_batch). with_similarity: the visual-text
// similarities for the media segments. Empty chunks are skipped; bad sizes or token ids
// are refused before anything is fed. allow_unencoded: media chunks without embeddings
// (Engine::prepare_prompt_unencoded) are laid out as media segments with null embeddings.
Result<PromptLayout> lay_out_prompt(const Engine::Impl& e, const PreparedPrompt& prompt, int64_t start_pos,
                                    bool with_similarity, bool allow_unencoded = false);

// One generated token fed at `position` as a text row.
struct DecodeRow {
  int32_t token = 0;
  int64_t position = 0;
  TokenKind kind = TokenKind::kText;
  DecoderInput input() const;  // views into *this
};

}  // namespace vlkv
