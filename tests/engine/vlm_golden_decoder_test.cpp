// Full mixed sequences against llama.cpp (tests/data/fixtures/vlm/*/kv-f32_fa-off):
// the fixture's text chunks and our own image embeddings (VisionModel::encode_image on
// test_image_64.png) through TextDecoder with an f32 KvCache, chunk by chunk as libmtmd
// decodes them; every position's logits, then the 16 greedy steps.
//
// Tolerance: f32 weights, f32 cache vs kv-f32_fa-off: max abs <= 1e-3 and 100% top-1, the
// README's threshold for f32 engines (llama.cpp is within 4e-5 of float64; summation
// order differs). Our image embeddings are within 1.2e-7 (qwen2vl) and 3e-6 (idefics3) of
// llama.cpp's, so they add nothing visible at that scale.
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
#include "text/tokenizer.h"
#include "vision/idefics3_model.h"
#include "vision/qwen2vl_positions.h"
#include "vision/vision_model.h"

namespace vlkv {
namespace {

struct Pair {
  std::string text_model, mmproj, run;
};

struct Loaded {
  std::unique_ptr<GgufFile> text_gguf, mm_gguf;
  TextHparams hp;
  TextWeights w;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<TextDecoder> dec;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<VisionModel> vm;
};

void load(const Pair& pair, Loaded& m) {
  const std::string models = vlm_test::fixtures() + "/models/";
  auto tg = GgufFile::open(models + pair.text_model);
  ASSERT_TRUE(tg.is_ok()) << tg.status().message();
  m.text_gguf = std::move(tg).value();
  auto mg = GgufFile::open(models + pair.mmproj);
  ASSERT_TRUE(mg.is_ok()) << mg.status().message();
  m.mm_gguf = std::move(mg).value();
  auto hp = read_text_hparams(*m.text_gguf);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  m.hp = *hp;
  auto w = bind_text_weights(*m.text_gguf, m.hp);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  m.w = std::move(w).value();
  auto tok = Tokenizer::from_gguf(*m.text_gguf);
  ASSERT_TRUE(tok.is_ok());
  m.tok = std::move(tok).value();
  m.dec = std::make_unique<TextDecoder>(m.hp, m.w);
  KvCacheConfig kc;
  kc.geometry = {static_cast<int>(m.hp.n_layers), static_cast<int>(m.hp.n_heads), static_cast<int>(m.hp.n_kv_heads),
                 static_cast<int>(m.hp.head_dim)};
  kc.method = "f32";
  kc.budget_bytes = 64ull << 20;
  auto kv = KvCache::create(kc);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  m.kv = std::move(kv).value();
  auto vm = VisionModel::load(*m.mm_gguf);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  m.vm = std::move(vm).value();
  ASSERT_EQ(m.vm->n_embd_out(), m.hp.n_embd);
}

void check_pair(const Pair& pair) {
  SCOPED_TRACE(pair.run);
  Loaded m;
  ASSERT_NO_FATAL_FAILURE(load(pair, m));
  const std::string base = vlm_test::fixtures() + pair.run;
  const nlohmann::json j = vlm_test::read_json(base + ".json");
  const int64_t n_vocab = j["n_vocab"].get<int64_t>();
  const bool mrope = j["use_mrope"].get<bool>();
  ASSERT_EQ(n_vocab, m.hp.n_vocab);
  const std::vector<float> ref = vlm_test::read_f32(base + ".logits.f32");
  const std::vector<float> ref_gen = vlm_test::read_f32(base + ".gen_logits.f32");
  const int64_t n_positions = j["n_positions"].get<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(ref.size()), n_positions * n_vocab);

  ThreadPool pool(2);
  Result<MediaEmbedding> media = m.vm->encode_image(vlm_test::test_image(), pool);
  ASSERT_TRUE(media.is_ok()) << media.status().message();
  std::vector<const EmbeddingRun*> runs;
  std::vector<std::string> texts;  // the special-token text between runs
  for (const MediaPiece& p : media->pieces) {
    if (p.kind == MediaPiece::Kind::kEmbeddings) runs.push_back(&p.embd);
    else texts.push_back(p.text);
  }

  auto seq = m.kv->add_sequence();
  ASSERT_TRUE(seq.is_ok());
  std::vector<float> all_logits, logits;
  size_t next_run = 0;
  int64_t n_past = 0;  // next text position
  for (const nlohmann::json& c : j["chunks"]) {
    const int64_t pos_start = c["pos_start"].get<int64_t>();
    EXPECT_EQ(pos_start, n_past) << "chunk position";
    const int64_t n = c["n_tokens"].get<int64_t>();
    std::vector<int64_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[i] = pos_start + i;
    DecoderInput in;
    in.n_tokens = n;
    in.positions = positions.data();
    std::vector<TokenId> tokens;
    std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kText);
    std::vector<int64_t> mpos;
    if (c["type"] == "text") {
      tokens = c["tokens"].get<std::vector<TokenId>>();
      in.tokens = tokens.data();
      n_past += n;
    } else {
      ASSERT_LT(next_run, runs.size());
      const EmbeddingRun& r = *runs[next_run++];
      ASSERT_EQ(r.n_tokens, n);
      in.embeddings = r.data.data();
      kinds.assign(static_cast<size_t>(n), TokenKind::kVisual);
      if (mrope) {
        mpos = qwen2vl_visual_positions(pos_start, r.grid_t, r.grid_h, r.grid_w);
        in.mrope_positions = mpos.data();
        n_past += qwen2vl_visual_n_pos(r.grid_t, r.grid_h, r.grid_w);
      } else {
        n_past += n;
      }
    }
    in.kinds = kinds.data();
    Status st = m.dec->forward(in, *m.kv, *seq, LogitsMode::kAll, logits, pool);
    ASSERT_TRUE(st.is_ok()) << st.message();
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
  }
  EXPECT_EQ(next_run, runs.size());
  ASSERT_EQ(all_logits.size(), ref.size());
  const golden::LogitDiff d = golden::compare_logits(all_logits.data(), ref.data(), n_positions, n_vocab);
  std::printf("%s: logits over %lld positions: max abs %.3g, mean abs %.3g, top-1 %lld/%lld\n", pair.run.c_str(),
              static_cast<long long>(n_positions), d.max_abs, d.mean_abs, static_cast<long long>(d.top1_agree),
              static_cast<long long>(d.top1_considered));
  EXPECT_LE(d.max_abs, 1e-3);
  EXPECT_EQ(d.top1_agree, d.top1_considered);

  // Greedy generation: row 0 of gen_logits is the last prompt row; each step feeds the
  // fixture's token at the fixture's position.
  const std::vector<TokenId> gen = j["generated_tokens"].get<std::vector<TokenId>>();
  const std::vector<int64_t> gen_pos = j["generated_positions"].get<std::vector<int64_t>>();
  std::vector<float> gen_logits(all_logits.end() - n_vocab, all_logits.end());
  std::vector<TokenId> ours = {golden::argmax(gen_logits.data(), n_vocab)};
  for (size_t i = 0; i + 1 < gen.size(); ++i) {
    EXPECT_EQ(gen_pos[i], n_past);
    const TokenKind kind = TokenKind::kText;
    DecoderInput in;
    in.n_tokens = 1;
    in.tokens = &gen[i];
    in.positions = &gen_pos[i];
    in.kinds = &kind;
    ASSERT_TRUE(m.dec->forward(in, *m.kv, *seq, LogitsMode::kLast, logits, pool).is_ok());
    ++n_past;
    ours.push_back(golden::argmax(logits.data(), n_vocab));
    gen_logits.insert(gen_logits.end(), logits.begin(), logits.end());
  }
  EXPECT_EQ(ours, gen);
  ASSERT_EQ(gen_logits.size(), ref_gen.size());
  const golden::LogitDiff g = golden::compare_logits(gen_logits.data(), ref_gen.data(), gen.size(), n_vocab);
  std::printf("%s: gen logits over %zu steps: max abs %.3g, top-1 %lld/%lld\n", pair.run.c_str(), gen.size(),
              g.max_abs, static_cast<long long>(g.top1_agree), static_cast<long long>(g.top1_considered));
  EXPECT_LE(g.max_abs, 1e-3);
  EXPECT_EQ(g.top1_agree, g.top1_considered);

  // The special tokens around the image runs: each layout string is one vocabulary entry
  // (looked up by piece, not tokenized, as libmtmd's lookup_token does); together with the runs they must give
  // the fixture's token at every position of the image span.
  std::vector<std::vector<std::string>> specials;  // per text piece, its vocabulary entries
  if (pair.mmproj.find("idefics3") != std::string::npos) {
    for (const Idefics3LayoutItem& it : idefics3_token_layout(2, 2)) {
      if (it.tile < 0) specials.push_back(it.tokens);
    }
  } else {
    for (const std::string& t : texts) specials.push_back({t});
  }
  std::vector<TokenId> span;  // token per position, -1 for visual
  size_t si = 0, ri = 0;
  for (const MediaPiece& p : media->pieces) {
    if (p.kind == MediaPiece::Kind::kEmbeddings) {
      span.insert(span.end(), static_cast<size_t>(runs[ri++]->n_tokens), -1);
    } else {
      ASSERT_LT(si, specials.size());
      for (const std::string& s : specials[si]) span.push_back(m.tok->find_token_by_piece(s));
      ++si;
    }
  }
  const std::vector<TokenId> pos_tokens = j["position_tokens"].get<std::vector<TokenId>>();
  const int64_t first_image = j["chunks"][1]["pos_start"].get<int64_t>();
  const int64_t span_start = first_image - static_cast<int64_t>(specials[0].size());
  ASSERT_LE(span_start + static_cast<int64_t>(span.size()), static_cast<int64_t>(pos_tokens.size()));
  if (!mrope) {  // qwen2vl's image span is 16 tokens over 4 positions: compare by token order instead
    EXPECT_EQ(span, std::vector<TokenId>(pos_tokens.begin() + span_start,
                                         pos_tokens.begin() + span_start + static_cast<int64_t>(span.size())));
  } else {
    std::vector<TokenId> by_order;  // the fixture's chunk tokens in order, -1 per visual token
    for (const nlohmann::json& c : j["chunks"]) {
      if (c["type"] == "text") {
        for (const auto& t : c["tokens"]) by_order.push_back(t.get<TokenId>());
      } else {
        by_order.insert(by_order.end(), c["n_tokens"].get<size_t>(), -1);
      }
    }
    EXPECT_EQ(span, std::vector<TokenId>(by_order.begin() + span_start,
                                         by_order.begin() + span_start + static_cast<int64_t>(span.size())));
  }
}

TEST(VlmGoldenDecoder, Idefics3MixedSequenceMatchesLlamaCppF32) {
  check_pair({"stories260K-idefics3-text.gguf", "mmproj-tiny-idefics3.gguf", "/vlm/idefics3/kv-f32_fa-off/vlm_p1"});
}

TEST(VlmGoldenDecoder, Qwen2VlMixedSequenceWithMropeMatchesLlamaCppF32) {
  check_pair({"qwen2vl-tiny-text.gguf", "mmproj-tiny-qwen2vl.gguf", "/vlm/qwen2vl/kv-f32_fa-off/vlm_q1"});
}

}  // namespace
}  // namespace vlkv
