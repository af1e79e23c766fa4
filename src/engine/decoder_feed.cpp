#include "engine/decoder_feed.h"

#include <string>

#include "base/check.h"
#include "engine/visual_similarity.h"
#include "vision/qwen2vl_positions.h"

namespace vlkv {

const FeedSegment* PromptLayout::segment_at(int64_t i) const {
  for (const FeedSegment& sg : segments)
    if (i >= sg.begin && i < sg.end) return &sg;
  return nullptr;
}

DecoderInput PromptLayout::rows(int64_t begin, int64_t n) const {
  const FeedSegment* sg = segment_at(begin);
  VLKV_CHECK_MSG(sg && n > 0 && begin + n <= sg->end, "decoder rows must lie in one prompt segment");
  return rows(*sg, begin, n, sg->embeddings, sg->similarity.empty() ? nullptr : sg->similarity.data());
}

DecoderInput PromptLayout::rows(const FeedSegment& sg, int64_t begin, int64_t n, const float* embeddings,
                                const float* similarity) const {
  VLKV_CHECK_MSG(n > 0 && begin >= sg.begin && begin + n <= sg.end, "decoder rows must lie in one prompt segment");
  VLKV_CHECK_MSG(!sg.media || embeddings, "media rows must be encoded before they are fed");
  const int64_t off = begin - sg.begin;  // within the segment
  const size_t at = static_cast<size_t>(begin);
  DecoderInput in;
  in.n_tokens = n;
  if (sg.media) in.embeddings = embeddings + off * n_embd_inp;
  else in.tokens = tokens.data() + at;
  if (!sg.mrope.empty()) in.mrope_positions = sg.mrope.data() + off * 3;
  if (similarity) in.visual_similarity = similarity + off;
  in.non_causal = sg.non_causal;
  in.positions = positions.data() + at;
  in.kinds = kinds.data() + at;
  return in;
}

Status check_token_ids(std::span<const int32_t> tokens, int64_t n_vocab) {
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab)
      return invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(n_vocab) + ")");
  return Status::ok();
}

PromptLayout lay_out_tokens(std::span<const int32_t> tokens, int64_t start_pos) {
  PromptLayout l;
  const int64_t n = static_cast<int64_t>(tokens.size());
  l.tokens.assign(tokens.begin(), tokens.end());
  l.positions.resize(tokens.size());
  for (int64_t i = 0; i < n; ++i) l.positions[static_cast<size_t>(i)] = start_pos + i;
  l.kinds.assign(tokens.size(), TokenKind::kText);
  l.segments.push_back(FeedSegment{0, n, nullptr, {}, {}, false, false, -1});
  l.next_pos = start_pos + n;
  return l;
}

namespace {

// One media chunk's rows: kVisual at consecutive positions (M-RoPE: positions from the grid).
Status lay_out_media(const Engine::Impl& e, const PromptChunk& chunk, int64_t chunk_index, std::vector<float> similarity,
                     bool allow_unencoded, PromptLayout& l, int64_t& pos) {
  const TextHparams& hp = e.hparams;
  const bool unencoded = allow_unencoded && chunk.embeddings.empty();
  if (!unencoded && static_cast<int64_t>(chunk.embeddings.size()) != chunk.n_tokens * hp.n_embd_inp())
    return invalid_argument("a media chunk's embeddings do not match its token count");
  const int64_t begin = l.n_rows();
  FeedSegment sg{begin,          begin + chunk.n_tokens, unencoded ? nullptr : chunk.embeddings.data(), {},
                 std::move(similarity), hp.media_non_causal, true, chunk_index};
  // gemma3: an image's tokens see each other, so the chunk is one step, as llama.cpp
  // requires of its ubatch.
  if (sg.non_causal && chunk.n_tokens > e.params.n_batch)
    return invalid_argument("this model decodes an image's " + std::to_string(chunk.n_tokens) +
                            " tokens with non-causal attention in one batch: raise --batch-size to at least " +
                            std::to_string(chunk.n_tokens));
  const bool mrope = hp.uses_mrope();
  if (mrope) {
    if (static_cast<int64_t>(chunk.grid_t) * chunk.grid_h * chunk.grid_w != chunk.n_tokens)
      return invalid_argument("media chunk grid does not match its token count");
    sg.mrope = qwen2vl_visual_positions(pos, chunk.grid_t, chunk.grid_h, chunk.grid_w, chunk.t_step);
  }
  for (int64_t i = 0; i < chunk.n_tokens; ++i) {
    l.tokens.push_back(0);
    l.positions.push_back(pos + i);
    l.kinds.push_back(TokenKind::kVisual);
  }
  pos += mrope ? qwen2vl_visual_n_pos(chunk.grid_t, chunk.grid_h, chunk.grid_w, chunk.t_step) : chunk.n_tokens;
  l.segments.push_back(std::move(sg));
  return Status::ok();
}

// One text chunk's rows: control tokens kSpecial, the rest kText.
Status lay_out_text(const Engine::Impl& e, const PromptChunk& chunk, PromptLayout& l, int64_t& pos) {
  if (static_cast<int64_t>(chunk.tokens.size()) != chunk.n_tokens)
    return invalid_argument("a text chunk's tokens do not match its token count");
  VLKV_RETURN_IF_ERROR(check_token_ids(chunk.tokens, e.hparams.n_vocab));
  const int64_t begin = l.n_rows();
  for (int32_t t : chunk.tokens) {
    l.tokens.push_back(t);
    l.positions.push_back(pos++);
    l.kinds.push_back(e.tokenizer->token_type(t) == TokenType::kControl ? TokenKind::kSpecial : TokenKind::kText);
  }
  l.segments.push_back(FeedSegment{begin, l.n_rows(), nullptr, {}, {}, false, false, -1});
  return Status::ok();
}

}  // namespace

Result<PromptLayout> lay_out_prompt(const Engine::Impl& e, const PreparedPrompt& prompt, int64_t start_pos,
                                    bool with_similarity, bool allow_unencoded) {
  std::vector<std::vector<float>> similarity;
  if (with_similarity && prompt.n_visual_tokens() > 0) {
    const Tokenizer& tok = *e.tokenizer;
    similarity = visual_text_similarity(prompt, e.weights.token_embd,
                                        [&](int32_t t) { return tok.token_type(t) != TokenType::kControl; });
  }
  PromptLayout l;
  l.n_embd_inp = e.hparams.n_embd_inp();
  int64_t pos = start_pos;
  for (size_t c = 0; c < prompt.chunks.size(); ++c) {
    const PromptChunk& chunk = prompt.chunks[c];
    if (chunk.n_tokens <= 0) continue;
    if (chunk.kind == PromptChunk::Kind::kMedia) {
      VLKV_RETURN_IF_ERROR(
          lay_out_media(e, chunk, static_cast<int64_t>(c), c < similarity.size() ? std::move(similarity[c]) : std::vector<float>{},
                        allow_unencoded, l, pos));
    } else {
      VLKV_RETURN_IF_ERROR(lay_out_text(e, chunk, l, pos));
    }
  }
  l.next_pos = pos;
  return l;
}

DecoderInput DecodeRow::input() const {
  DecoderInput in;
  in.n_tokens = 1;
  in.tokens = &token;
  in.positions = &position;
  in.kinds = &kind;
  return in;
}

}  // namespace vlkv
