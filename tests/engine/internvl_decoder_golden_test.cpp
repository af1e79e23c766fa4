// The InternVL text side alone (qwen2 decoder) against llama.cpp: the fixture's own text
// tokens and image embeddings (image_embd.f32, 4 per tile chunk) through TextDecoder with an
// f32 cache, chunk by chunk as libmtmd decodes them; every prompt row's logits, then the 16
// greedy steps fed the fixture's tokens.
//
// Tolerance: 1e-3 max abs and 100% top-1 (README-batch2 "How to compare" item 4: f32 math vs
// llama.cpp's f32 graph; its float64 check is within 1.4e-5 of the fixture for internvl).
#include <gtest/gtest.h>

#include <memory>

#include "../vision/vlm_fixture_util.h"
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
  const std::string base = vlm_test::fixtures() + "/vlm/internvl/kv-f32_fa-off/" + run;
  auto g = GgufFile::open(vlm_test::fixtures() + "/models/internvl-tiny-text.gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto hp = read_text_hparams(**g);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  auto w = bind_text_weights(**g, *hp);
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

  const nlohmann::json j = vlm_test::read_json(base + ".json");
  const int64_t n_vocab = j["n_vocab"].get<int64_t>();
  const int64_t n_embd = j["n_embd"].get<int64_t>();
  ASSERT_EQ(n_vocab, hp->n_vocab);
  ASSERT_EQ(n_embd, hp->n_embd);
  const std::vector<float> embd = vlm_test::read_f32(base + ".image_embd.f32");
  const std::vector<float> ref = vlm_test::read_f32(base + ".logits.f32");
  const std::vector<float> ref_gen = vlm_test::read_f32(base + ".gen_logits.f32");
  const int64_t n_positions = j["n_positions"].get<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(ref.size()), n_positions * n_vocab);

  ThreadPool pool(2);
  std::vector<float> all, logits;
  size_t next_embd = 0;  // rows of embd consumed
  int64_t n_past = 0;
  for (const nlohmann::json& c : j["chunks"]) {
    const int64_t pos_start = c["pos_start"].get<int64_t>();
    ASSERT_EQ(pos_start, n_past);
    const int64_t n = c["n_tokens"].get<int64_t>();
    std::vector<int64_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = pos_start + i;
    DecoderInput in;
    in.n_tokens = n;
    in.positions = positions.data();
    std::vector<TokenId> tokens;
    std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kText);
    if (c["type"] == "text") {
      tokens = c["tokens"].get<std::vector<TokenId>>();
      in.tokens = tokens.data();
    } else {
      ASSERT_LE((next_embd + static_cast<size_t>(n)) * static_cast<size_t>(n_embd), embd.size());
      in.embeddings = &embd[next_embd * static_cast<size_t>(n_embd)];
      next_embd += static_cast<size_t>(n);
      kinds.assign(static_cast<size_t>(n), TokenKind::kVisual);
    }
    in.kinds = kinds.data();
    n_past += n;
    const Status st = dec.forward(in, **kv, *seq, LogitsMode::kAll, logits, pool);
    ASSERT_TRUE(st.is_ok()) << st.message();
    all.insert(all.end(), logits.begin(), logits.end());
  }
  EXPECT_EQ(next_embd * static_cast<size_t>(n_embd), embd.size());
  ASSERT_EQ(all.size(), ref.size());
  const golden::LogitDiff d = golden::compare_logits(all.data(), ref.data(), n_positions, n_vocab);
  std::printf("internvl %s: prompt logits over %lld rows: max abs %.3g, top-1 %lld/%lld\n", run.c_str(),
              static_cast<long long>(n_positions), d.max_abs, static_cast<long long>(d.top1_agree),
              static_cast<long long>(d.top1_considered));
  EXPECT_LE(d.max_abs, 1e-3);
  EXPECT_EQ(d.top1_agree, d.top1_considered);

  const std::vector<TokenId> gen = j["generated_tokens"].get<std::vector<TokenId>>();
  const std::vector<int64_t> gen_pos = j["generated_positions"].get<std::vector<int64_t>>();
  std::vector<float> gen_logits(all.end() - n_vocab, all.end());
  std::vector<TokenId> ours = {golden::argmax(gen_logits.data(), n_vocab)};
  for (size_t i = 0; i + 1 < gen.size(); ++i) {
    const TokenKind kind = TokenKind::kText;
    DecoderInput in;
    in.n_tokens = 1;
    in.tokens = &gen[i];
    in.positions = &gen_pos[i];
    in.kinds = &kind;
    ASSERT_TRUE(dec.forward(in, **kv, *seq, LogitsMode::kLast, logits, pool).is_ok());
    ours.push_back(golden::argmax(logits.data(), n_vocab));
    gen_logits.insert(gen_logits.end(), logits.begin(), logits.end());
  }
  EXPECT_EQ(ours, gen);
  ASSERT_EQ(gen_logits.size(), ref_gen.size());
  const golden::LogitDiff gd = golden::compare_logits(gen_logits.data(), ref_gen.data(), gen.size(), n_vocab);
  std::printf("internvl %s: gen logits over %zu steps: max abs %.3g\n", run.c_str(), gen.size(), gd.max_abs);
  EXPECT_LE(gd.max_abs, 1e-3);
  EXPECT_EQ(gd.top1_agree, gd.top1_considered);
}

TEST(InternvlDecoderGolden, SquareRunFromFixtureEmbeddings) { check_run("vlm_p1"); }
TEST(InternvlDecoderGolden, WideRunFromFixtureEmbeddings) { check_run("vlm_p1_wide"); }

}  // namespace
}  // namespace vlkv
