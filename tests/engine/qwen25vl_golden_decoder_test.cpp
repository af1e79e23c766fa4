// The Qwen2.5-VL text model (arch qwen2vl) alone against llama.cpp: the fixture's own
// image embeddings (vlm/qwen25vl/kv-f32_fa-off/<run>.image_embd.f32) and text chunks
// through TextDecoder with an f32 KvCache, chunk by chunk with mtmd's M-RoPE positions;
// every prompt row's logits, then the 16 greedy steps (gen_logits.f32).
//
// Tolerance 1e-3 max abs and 100% top-1 (README-batch2 "How to compare" item 4). Two
// known gaps sit inside it: llama.cpp's qwen2vl loader ignores the file's RMSNorm eps
// (uses 0, README-batch2 item 4) while we use the file's 1e-6 (the float64 check puts
// that at 1.1e-4), and f32 summation order (~1e-5). The 2D-causal mask inside the image
// (item 7) is what a causal prefill in raster order gives; seeing later image tokens
// would be off by 8.
#include <gtest/gtest.h>

#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "golden_util.h"
#include "kv/kv_cache.h"
#include "text/decoder.h"
#include "text/hparams.h"
#include "text/text_weights.h"
#include "vision/qwen2vl_positions.h"

namespace vlkv {
namespace {

constexpr double kLogitTol = 1e-3;

void check_run(const std::string& run) {
  SCOPED_TRACE(run);
  auto g = GgufFile::open(golden::fixtures() + "/models/qwen25vl-tiny-text.gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto hp = read_text_hparams(**g);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_EQ(hp->arch, TextArch::kQwen2Vl);
  EXPECT_FLOAT_EQ(hp->rms_eps, 1e-6f);  // the file's value, not llama.cpp's 0
  EXPECT_FALSE(hp->tied_output);
  auto w = bind_text_weights(**g, *hp);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  TextDecoder dec(*hp, *w);
  KvCacheConfig kc;
  kc.geometry = {static_cast<int>(hp->n_layers), static_cast<int>(hp->n_heads), static_cast<int>(hp->n_kv_heads),
                 static_cast<int>(hp->head_dim)};
  kc.method = "f32";
  kc.budget_bytes = 16ull << 20;
  auto kv = KvCache::create(kc);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  auto seq = (*kv)->add_sequence();
  ASSERT_TRUE(seq.is_ok());

  const std::string base = golden::fixtures() + "/vlm/qwen25vl/kv-f32_fa-off/" + run;
  const nlohmann::json j = golden::read_json(base + ".json");
  const int64_t n_vocab = j["n_vocab"].get<int64_t>();
  const int64_t n_embd = hp->n_embd;
  ASSERT_EQ(n_vocab, hp->n_vocab);
  const std::vector<float> embd = golden::read_f32(base + ".image_embd.f32");
  const std::vector<float> ref = golden::read_f32(base + ".logits.f32");
  const std::vector<float> ref_gen = golden::read_f32(base + ".gen_logits.f32");
  const int64_t n_positions = j["n_positions"].get<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(ref.size()), n_positions * n_vocab);

  ThreadPool pool(2);
  std::vector<float> all, logits;
  for (const nlohmann::json& c : j["chunks"]) {
    const int64_t start = c["pos_start"].get<int64_t>();
    const int64_t n = c["n_tokens"].get<int64_t>();
    std::vector<int64_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pos[i] = start + i;
    std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kText);
    std::vector<TokenId> tokens;
    std::vector<int64_t> mpos;  // [n, 3] (t, y, x) as the fixture gives them
    DecoderInput in;
    in.n_tokens = n;
    in.positions = pos.data();
    if (c["type"] == "text") {
      tokens = c["tokens"].get<std::vector<TokenId>>();
      in.tokens = tokens.data();
    } else {
      ASSERT_EQ(static_cast<int64_t>(embd.size()), n * n_embd);
      in.embeddings = embd.data();
      kinds.assign(static_cast<size_t>(n), TokenKind::kVisual);
      for (const auto& p : c["mrope_pos_t_y_x"])
        for (const auto& v : p) mpos.push_back(v.get<int64_t>());
      ASSERT_EQ(static_cast<int64_t>(mpos.size()), n * 3);
      in.mrope_positions = mpos.data();
    }
    in.kinds = kinds.data();
    ASSERT_TRUE(dec.forward(in, **kv, *seq, LogitsMode::kAll, logits, pool).is_ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  ASSERT_EQ(all.size(), ref.size());
  const golden::LogitDiff d = golden::compare_logits(all.data(), ref.data(), n_positions, n_vocab);
  std::printf("qwen25vl %s: logits over %lld rows: max abs %.3g, top-1 %lld/%lld\n", run.c_str(),
              static_cast<long long>(n_positions), d.max_abs, static_cast<long long>(d.top1_agree),
              static_cast<long long>(d.top1_considered));
  EXPECT_LE(d.max_abs, kLogitTol);
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
  const golden::LogitDiff gd = golden::compare_logits(gen_logits.data(), ref_gen.data(), gen.size(), n_vocab);
  std::printf("qwen25vl %s: gen logits over %zu steps: max abs %.3g, top-1 %lld/%lld\n", run.c_str(), gen.size(),
              gd.max_abs, static_cast<long long>(gd.top1_agree), static_cast<long long>(gd.top1_considered));
  EXPECT_LE(gd.max_abs, kLogitTol);
  EXPECT_EQ(gd.top1_agree, gd.top1_considered);
}

TEST(Qwen25VlGoldenDecoder, SquareImageRunMatchesLlamaCpp) { check_run("vlm_p1"); }
TEST(Qwen25VlGoldenDecoder, WideImageRunMatchesLlamaCpp) { check_run("vlm_p1_wide"); }

}  // namespace
}  // namespace vlkv
