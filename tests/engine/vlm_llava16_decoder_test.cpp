// LLaVA-NeXT's text side alone against llama.cpp: the fixture's own image embeddings
// (image_embd.f32, one 16-token chunk per tile) and text chunks through stories260K's
// TextDecoder with an f32 cache, chunk by chunk at the fixture's positions; every prompt
// row (logits.f32) and the 15 decode steps fed the fixture's tokens (gen_logits.f32).
// Tolerance 1e-3 max abs and 100% top-1 (README-batch2 "How to compare" item 4: f32 math
// agrees with llama.cpp within about 1e-3; float64 NumPy was within 1.3e-5 here).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "golden_util.h"
#include "kv/kv_cache.h"
#include "text/decoder.h"
#include "text/hparams.h"
#include "text/text_weights.h"

namespace vlkv {
namespace {

void check_run(const std::string& run) {
  SCOPED_TRACE(run);
  auto tg = GgufFile::open(golden::fixtures() + "/models/stories260K.gguf");
  ASSERT_TRUE(tg.is_ok()) << tg.status().message();
  auto hp = read_text_hparams(**tg);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  auto w = bind_text_weights(**tg, *hp);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  TextDecoder dec(*hp, *w);
  KvCacheConfig kc;
  kc.geometry = {static_cast<int>(hp->n_layers), static_cast<int>(hp->n_heads), static_cast<int>(hp->n_kv_heads),
                 static_cast<int>(hp->head_dim)};
  kc.method = "f32";
  kc.budget_bytes = 64ull << 20;
  auto kv = KvCache::create(kc);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  auto seq = (*kv)->add_sequence();
  ASSERT_TRUE(seq.is_ok());

  const std::string base = golden::fixtures() + "/vlm/llava16/kv-f32_fa-off/" + run;
  const nlohmann::json j = golden::read_json(base + ".json");
  const int64_t n_vocab = j["n_vocab"].get<int64_t>();
  const int64_t n_embd = j["n_embd"].get<int64_t>();
  ASSERT_EQ(n_vocab, hp->n_vocab);
  ASSERT_EQ(n_embd, hp->n_embd);
  const std::vector<float> embd = golden::read_f32(base + ".image_embd.f32");
  const std::vector<float> ref = golden::read_f32(base + ".logits.f32");
  const std::vector<float> ref_gen = golden::read_f32(base + ".gen_logits.f32");
  const int64_t n_positions = j["n_positions"].get<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(ref.size()), n_positions * n_vocab);

  ThreadPool pool(2);
  std::vector<float> all, logits;
  int64_t n_past = 0, image_row = 0;
  for (const nlohmann::json& c : j["chunks"]) {
    const int64_t n = c["n_tokens"].get<int64_t>();
    ASSERT_EQ(c["pos_start"].get<int64_t>(), n_past);
    std::vector<int64_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = n_past + i;
    std::vector<TokenId> tokens;
    std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kText);
    DecoderInput in;
    in.n_tokens = n;
    in.positions = positions.data();
    if (c["type"] == "text") {
      tokens = c["tokens"].get<std::vector<TokenId>>();
      in.tokens = tokens.data();
    } else {
      ASSERT_LE((image_row + n) * n_embd, static_cast<int64_t>(embd.size()));
      in.embeddings = &embd[static_cast<size_t>(image_row * n_embd)];
      kinds.assign(static_cast<size_t>(n), TokenKind::kVisual);
      image_row += n;
    }
    in.kinds = kinds.data();
    const Status st = dec.forward(in, **kv, *seq, LogitsMode::kAll, logits, pool);
    ASSERT_TRUE(st.is_ok()) << st.message();
    all.insert(all.end(), logits.begin(), logits.end());
    n_past += n;
  }
  EXPECT_EQ(image_row * n_embd, static_cast<int64_t>(embd.size()));
  ASSERT_EQ(all.size(), ref.size());
  const golden::LogitDiff d = golden::compare_logits(all.data(), ref.data(), n_positions, n_vocab);
  std::printf("llava16 %s: logits over %lld rows: max abs %.3g, top-1 %lld/%lld\n", run.c_str(),
              static_cast<long long>(n_positions), d.max_abs, static_cast<long long>(d.top1_agree),
              static_cast<long long>(d.top1_considered));
  EXPECT_LE(d.max_abs, 1e-3);
  EXPECT_EQ(d.top1_agree, d.top1_considered);

  const std::vector<TokenId> gen = j["generated_tokens"].get<std::vector<TokenId>>();
  const std::vector<int64_t> gen_pos = j["generated_positions"].get<std::vector<int64_t>>();
  std::vector<float> gen_logits(all.end() - n_vocab, all.end());
  for (size_t i = 0; i + 1 < gen.size(); ++i) {
    const TokenKind kind = TokenKind::kText;
    DecoderInput in;
    in.n_tokens = 1;
    in.tokens = &gen[i];
    in.positions = &gen_pos[i];
    in.kinds = &kind;
    ASSERT_TRUE(dec.forward(in, **kv, *seq, LogitsMode::kLast, logits, pool).is_ok());
    gen_logits.insert(gen_logits.end(), logits.begin(), logits.end());
  }
  ASSERT_EQ(gen_logits.size(), ref_gen.size());
  const golden::LogitDiff g = golden::compare_logits(gen_logits.data(), ref_gen.data(), gen.size(), n_vocab);
  std::printf("llava16 %s: gen logits over %zu steps: max abs %.3g, top-1 %lld/%lld\n", run.c_str(), gen.size(),
              g.max_abs, static_cast<long long>(g.top1_agree), static_cast<long long>(g.top1_considered));
  EXPECT_LE(g.max_abs, 1e-3);
  EXPECT_EQ(g.top1_agree, g.top1_considered);
}

TEST(VlmLlava16Decoder, SquareRunFromFixtureEmbeddings) { check_run("vlm_p1"); }
TEST(VlmLlava16Decoder, WideRunFromFixtureEmbeddings) { check_run("vlm_p1_wide"); }

}  // namespace
}  // namespace vlkv
