// Qwen2.5-VL video through the engine: the frame rate of a MediaItem becomes the chunk's
// temporal step (2 / fps s per temporal patch x 2 tokens/s, HF get_rope_index), and the
// Session feeds the decoder exactly the hand-computed M-RoPE positions — checked against
// a TextDecoder run with those positions written out here, for the prompt's last logits and
// for a text token after it (where the position counter must have advanced by
// max(T(grid_t - 1) + 1, grid_h, grid_w)).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "golden_util.h"
#include "kv/kv_cache.h"
#include "text/decoder.h"
#include "text/hparams.h"
#include "text/text_weights.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

std::vector<Image> clip(int n) {
  std::vector<Image> frames;
  for (int i = 0; i < n; ++i) {
    Image f;
    f.width = 56;
    f.height = 84;
    f.pixels.resize(56 * 84 * 3);
    for (size_t k = 0; k < f.pixels.size(); ++k) f.pixels[k] = static_cast<uint8_t>((k * 7 + i * 61) & 255);
    frames.push_back(f);
  }
  return frames;
}

std::unique_ptr<Engine> load_engine() {
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

TEST(Qwen25VlVideoPositions, FrameRateSetsTheTemporalStep) {
  std::unique_ptr<Engine> e = load_engine();
  ASSERT_TRUE(e);
  for (const auto& [fps, step] : std::vector<std::pair<double, double>>{{4, 1}, {2, 2}, {1, 4}, {0, 2}}) {
    const Prompt prompt = e->user_prompt("What happens?", {MediaItem{clip(5), true, fps}}, /*use_template=*/false);
    Result<PreparedPrompt> pp = e->prepare_prompt(prompt, true);
    ASSERT_TRUE(pp.is_ok()) << pp.status().message();
    int n_media = 0;
    for (const PromptChunk& c : pp->chunks) {
      if (c.kind != PromptChunk::Kind::kMedia) continue;
      ++n_media;
      EXPECT_EQ(c.grid_t, 3);
      EXPECT_DOUBLE_EQ(c.t_step, step) << "fps " << fps;
    }
    EXPECT_EQ(n_media, 1);
  }
  // A still image keeps step 1 whatever the item says.
  Result<PreparedPrompt> img = e->prepare_prompt(e->user_prompt("x", {MediaItem{clip(1), false, 1.0}}, false), true);
  ASSERT_TRUE(img.is_ok());
  for (const PromptChunk& c : img->chunks) {
    if (c.kind == PromptChunk::Kind::kMedia) {
      EXPECT_DOUBLE_EQ(c.t_step, 1.0);
    }
  }
}

TEST(Qwen25VlVideoPositions, SessionUsesTimeBasedPositions) {
  std::unique_ptr<Engine> e = load_engine();
  ASSERT_TRUE(e);
  // 1 fps: 2 s per temporal patch -> step 4. 5 frames -> grid_t 3 (t = 0, 4, 8), grid 4 x 3.
  const Prompt prompt = e->user_prompt("A clip:", {MediaItem{clip(5), true, 1.0}}, false);
  Result<PreparedPrompt> pp = e->prepare_prompt(prompt, true);
  ASSERT_TRUE(pp.is_ok()) << pp.status().message();
  Result<std::unique_ptr<Session>> s = e->new_session();
  ASSERT_TRUE(s.is_ok());
  std::vector<float> ours;
  ASSERT_TRUE((*s)->eval_prompt(*pp, &ours).is_ok());
  const int32_t next_token = 300;
  std::vector<float> ours_next;
  ASSERT_TRUE((*s)->eval({next_token}, false, &ours_next).is_ok());

  // The same chunks through the decoder with the positions written out by hand.
  auto g = GgufFile::open(golden::fixtures() + "/models/qwen25vl-tiny-text.gguf");
  ASSERT_TRUE(g.is_ok());
  auto hp = read_text_hparams(**g);
  ASSERT_TRUE(hp.is_ok());
  auto w = bind_text_weights(**g, *hp);
  ASSERT_TRUE(w.is_ok());
  TextDecoder dec(*hp, *w);
  KvCacheConfig kc;
  kc.geometry = {static_cast<int>(hp->n_layers), static_cast<int>(hp->n_heads), static_cast<int>(hp->n_kv_heads),
                 static_cast<int>(hp->head_dim)};
  kc.method = "f32";
  kc.budget_bytes = 16ull << 20;
  auto kv = KvCache::create(kc);
  ASSERT_TRUE(kv.is_ok());
  auto seq = (*kv)->add_sequence();
  ASSERT_TRUE(seq.is_ok());
  ThreadPool pool(2);
  std::vector<float> ref;
  int64_t p = 0;
  bool saw_video = false;
  for (const PromptChunk& c : pp->chunks) {
    std::vector<int64_t> pos(static_cast<size_t>(c.n_tokens));
    for (int64_t i = 0; i < c.n_tokens; ++i) pos[i] = p + i;
    std::vector<TokenKind> kinds(static_cast<size_t>(c.n_tokens), TokenKind::kText);
    std::vector<int64_t> mpos;
    DecoderInput in;
    in.n_tokens = c.n_tokens;
    in.positions = pos.data();
    if (c.kind == PromptChunk::Kind::kMedia) {
      saw_video = true;
      ASSERT_EQ(c.grid_t, 3);
      ASSERT_EQ(c.grid_h, 4);  // 56x84 is 2x3 merged tokens, below 8: upscaled to 84x112
      ASSERT_EQ(c.grid_w, 3);
      for (int t = 0; t < 3; ++t)
        for (int y = 0; y < 4; ++y)
          for (int x = 0; x < 3; ++x) mpos.insert(mpos.end(), {p + 4 * t, p + y, p + x});
      in.mrope_positions = mpos.data();
      in.embeddings = c.embeddings.data();
      kinds.assign(kinds.size(), TokenKind::kVisual);
      p += 9;  // HF: the text continues at the largest position + 1 = p + 8 + 1
    } else {
      in.tokens = c.tokens.data();
      p += c.n_tokens;
    }
    in.kinds = kinds.data();
    ASSERT_TRUE(dec.forward(in, **kv, *seq, LogitsMode::kLast, ref, pool).is_ok());
  }
  ASSERT_TRUE(saw_video);
  ASSERT_EQ(ours.size(), ref.size());
  EXPECT_LE(golden::compare_logits(ours.data(), ref.data(), 1, hp->n_vocab).max_abs, 1e-4);

  const TokenKind kind = TokenKind::kText;
  DecoderInput in;
  in.n_tokens = 1;
  in.tokens = &next_token;
  in.positions = &p;
  in.kinds = &kind;
  ASSERT_TRUE(dec.forward(in, **kv, *seq, LogitsMode::kLast, ref, pool).is_ok());
  ASSERT_EQ(ours_next.size(), ref.size());
  EXPECT_LE(golden::compare_logits(ours_next.data(), ref.data(), 1, hp->n_vocab).max_abs, 1e-4);
}

}  // namespace
}  // namespace vlkv
