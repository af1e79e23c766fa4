// The one feed path (src/engine/decoder_feed.h): a prompt's rows get their kinds, RoPE and
// Qwen2-VL M-RoPE positions (written out here from the paper's rule, not from the library's
// function), media rows point at their embeddings, a decoder input never crosses a segment,
// and bad chunks are refused before anything is fed.
#include "engine/decoder_feed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "golden_util.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

std::unique_ptr<Engine> load_qwen25vl() {
  EngineParams p;
  p.model_path = golden::fixtures() + "/models/qwen25vl-tiny-text.gguf";
  p.mmproj_path = golden::fixtures() + "/models/mmproj-tiny-qwen25vl.gguf";
  p.kv_method = "f32";
  p.kv_budget_bytes = 16ull << 20;
  p.n_threads = 2;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

Image picture(int w, int h) {
  Image im;
  im.width = w;
  im.height = h;
  im.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (size_t k = 0; k < im.pixels.size(); ++k) im.pixels[k] = static_cast<uint8_t>((k * 13) & 255);
  return im;
}

TEST(DecoderFeed, TokensAreTextRowsAtConsecutivePositions) {
  const std::vector<int32_t> ids = {5, 6, 7};
  const PromptLayout l = lay_out_tokens(ids, 10);
  EXPECT_EQ(l.n_rows(), 3);
  EXPECT_EQ(l.positions, (std::vector<int64_t>{10, 11, 12}));
  EXPECT_EQ(l.kinds, std::vector<TokenKind>(3, TokenKind::kText));
  EXPECT_EQ(l.next_pos, 13);
  const DecoderInput in = l.rows(1, 2);
  EXPECT_EQ(in.n_tokens, 2);
  EXPECT_EQ(in.tokens[0], 6);
  EXPECT_EQ(in.positions[1], 12);
  EXPECT_EQ(in.embeddings, nullptr);
  EXPECT_EQ(in.mrope_positions, nullptr);

  const DecodeRow row{42, 99};
  const DecoderInput d = row.input();
  EXPECT_EQ(d.n_tokens, 1);
  EXPECT_EQ(*d.tokens, 42);
  EXPECT_EQ(*d.positions, 99);
  EXPECT_EQ(*d.kinds, TokenKind::kText);

  EXPECT_TRUE(check_token_ids(ids, 8).is_ok());
  EXPECT_EQ(check_token_ids(ids, 7).message(), "token id 7 is outside the vocabulary [0, 7)");
}

TEST(DecoderFeed, Qwen2VlImageGetsMropePositionsAndAdvancesByItsGrid) {
  std::unique_ptr<Engine> e = load_qwen25vl();
  ASSERT_TRUE(e);
  const Prompt prompt = e->user_prompt("What is it?", {MediaItem{{picture(56, 84)}, false, 0}}, /*use_template=*/false);
  Result<PreparedPrompt> pp = e->prepare_prompt(prompt, /*add_bos=*/true);
  ASSERT_TRUE(pp.is_ok()) << pp.status().message();
  const int64_t start = 7;  // a later turn of a session
  Result<PromptLayout> l = lay_out_prompt(e->impl(), *pp, start, /*with_similarity=*/false);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  EXPECT_EQ(l->n_rows(), pp->n_tokens());

  int64_t row = 0, pos = start;
  size_t seg = 0;
  for (const PromptChunk& c : pp->chunks) {
    if (c.n_tokens == 0) continue;
    ASSERT_LT(seg, l->segments.size());
    const FeedSegment& sg = l->segments[seg++];
    EXPECT_EQ(sg.begin, row);
    EXPECT_EQ(sg.end, row + c.n_tokens);
    if (c.kind == PromptChunk::Kind::kText) {
      for (int64_t i = 0; i < c.n_tokens; ++i, ++row, ++pos) {
        EXPECT_EQ(l->positions[static_cast<size_t>(row)], pos);
        EXPECT_EQ(l->tokens[static_cast<size_t>(row)], c.tokens[static_cast<size_t>(i)]);
        EXPECT_NE(l->kinds[static_cast<size_t>(row)], TokenKind::kVisual);
      }
      EXPECT_TRUE(sg.mrope.empty());
      continue;
    }
    // An image (grid_t 1): token (y, x) row-major at (t, h, w) = (p, p + y, p + x).
    ASSERT_EQ(c.grid_t, 1);
    ASSERT_EQ(static_cast<int64_t>(c.grid_h) * c.grid_w, c.n_tokens);
    ASSERT_EQ(static_cast<int64_t>(sg.mrope.size()), 3 * c.n_tokens);
    for (int64_t i = 0; i < c.n_tokens; ++i) {
      EXPECT_EQ(sg.mrope[static_cast<size_t>(3 * i)], pos);
      EXPECT_EQ(sg.mrope[static_cast<size_t>(3 * i + 1)], pos + i / c.grid_w);
      EXPECT_EQ(sg.mrope[static_cast<size_t>(3 * i + 2)], pos + i % c.grid_w);
      EXPECT_EQ(l->kinds[static_cast<size_t>(row + i)], TokenKind::kVisual);
    }
    const DecoderInput in = l->rows(row + 1, c.n_tokens - 1);  // a piece, as n_batch cuts one
    EXPECT_EQ(in.embeddings, c.embeddings.data() + e->impl().hparams.n_embd_inp());
    EXPECT_EQ(in.mrope_positions, sg.mrope.data() + 3);
    EXPECT_EQ(in.tokens, nullptr);
    EXPECT_EQ(in.kinds[0], TokenKind::kVisual);
    row += c.n_tokens;
    pos += std::max(c.grid_h, c.grid_w);  // the text after it: p + max(1, grid_h, grid_w)
  }
  EXPECT_EQ(seg, l->segments.size());
  EXPECT_EQ(l->next_pos, pos);
}

TEST(DecoderFeed, BadChunksAreRefusedBeforeFeeding) {
  std::unique_ptr<Engine> e = load_qwen25vl();
  ASSERT_TRUE(e);
  PreparedPrompt p;
  PromptChunk text;
  text.tokens = {1, 2};
  text.n_tokens = 3;  // disagrees with its ids
  p.chunks.push_back(text);
  EXPECT_FALSE(lay_out_prompt(e->impl(), p, 0, false).is_ok());

  p.chunks[0].tokens = {1, static_cast<int32_t>(e->info().n_vocab)};
  p.chunks[0].n_tokens = 2;
  Result<PromptLayout> bad_id = lay_out_prompt(e->impl(), p, 0, false);
  ASSERT_FALSE(bad_id.is_ok());
  EXPECT_NE(bad_id.status().message().find("outside the vocabulary"), std::string::npos);

  PromptChunk media;
  media.kind = PromptChunk::Kind::kMedia;
  media.n_tokens = 4;
  media.grid_h = 2;
  media.grid_w = 3;  // 6 cells for 4 tokens
  media.embeddings.resize(static_cast<size_t>(4 * e->impl().hparams.n_embd_inp()));
  p.chunks.assign(1, media);
  Result<PromptLayout> bad_grid = lay_out_prompt(e->impl(), p, 0, false);
  ASSERT_FALSE(bad_grid.is_ok());
  EXPECT_EQ(bad_grid.status().message(), "media chunk grid does not match its token count");
  p.chunks[0].embeddings.pop_back();
  EXPECT_FALSE(lay_out_prompt(e->impl(), p, 0, false).is_ok());
}

}  // namespace
}  // namespace vlkv
