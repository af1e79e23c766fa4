// The qwen3vl text decoder alone against llama.cpp (tests/data/fixtures/vlm/qwen3vl): the
// fixture's own image embeddings (image_embd.f32, 384 wide: the input embedding and two
// deepstack parts) and text tokens, chunk by chunk at libmtmd's M-RoPE positions, through
// TextDecoder with an f32 cache; every prompt row's logits, then the 16 greedy steps.
//
// Tolerance 1e-3 max abs and 100% top-1 (README-batch2 "How to compare" item 4: f32 math vs
// llama.cpp's f32 graph; its float64 check is within 4e-5). The checks below also show that
// q/k norms, interleaved M-RoPE and deepstack each matter: dropping any moves the logits by
// far more than that.
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
#include "vision/qwen2vl_positions.h"

namespace vlkv {
namespace {

enum class Variant { kAsFile, kNoDeepstack, kConsecutiveSections };

// Max abs difference of all prompt rows and all generation steps against the fixture.
struct Result2 {
  double prompt_max = 0, gen_max = 0;
  bool top1_ok = true;
};

Result2 run(const std::string& name, Variant variant) {
  Result2 out;
  const std::string base = golden::fixtures() + "/vlm/qwen3vl/kv-f32_fa-off/" + name;
  const nlohmann::json j = golden::read_json(base + ".json");
  auto g = GgufFile::open(golden::fixtures() + "/models/qwen3vl-tiny-text.gguf");
  EXPECT_TRUE(g.is_ok());
  if (!g.is_ok()) return out;
  auto hp = read_text_hparams(**g);
  EXPECT_TRUE(hp.is_ok()) << hp.status().message();
  if (!hp.is_ok()) return out;
  TextHparams h = *hp;
  EXPECT_EQ(h.arch, TextArch::kQwen3Vl);
  EXPECT_EQ(h.n_deepstack_layers, 2);
  EXPECT_EQ(h.n_embd_inp(), j["n_embd_inp"].get<int64_t>());
  auto w = bind_text_weights(**g, h);
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  if (!w.is_ok()) return out;
  const int64_t embd_stride = h.n_embd_inp();  // the fixture rows are 384 wide either way
  std::vector<float> embd = golden::read_f32(base + ".image_embd.f32");
  if (variant == Variant::kNoDeepstack) {
    for (size_t r = 0; r < embd.size() / embd_stride; ++r)
      std::fill_n(embd.begin() + r * embd_stride + h.n_embd, embd_stride - h.n_embd, 0.0f);
  }
  if (variant == Variant::kConsecutiveSections) h.rope_interleaved = false;
  TextDecoder dec(h, *w);
  KvCacheConfig kc;
  kc.geometry = {static_cast<int>(h.n_layers), static_cast<int>(h.n_heads), static_cast<int>(h.n_kv_heads),
                 static_cast<int>(h.head_dim)};
  kc.method = "f32";
  kc.budget_bytes = 64ull << 20;
  auto kv = KvCache::create(kc);
  EXPECT_TRUE(kv.is_ok());
  auto seq = (*kv)->add_sequence();
  ThreadPool pool(2);
  const int64_t n_vocab = j["n_vocab"].get<int64_t>();
  std::vector<float> all, logits;
  int64_t n_past = 0;
  for (const nlohmann::json& c : j["chunks"]) {
    const int64_t start = c["pos_start"].get<int64_t>(), n = c["n_tokens"].get<int64_t>();
    EXPECT_EQ(start, n_past);
    std::vector<int64_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[i] = start + i;
    std::vector<TokenId> tokens;
    std::vector<TokenKind> kinds(static_cast<size_t>(n), TokenKind::kText);
    std::vector<int64_t> mpos;
    DecoderInput in;
    in.n_tokens = n;
    in.positions = positions.data();
    if (c["type"] == "text") {
      tokens = c["tokens"].get<std::vector<TokenId>>();
      in.tokens = tokens.data();
      n_past += n;
    } else {
      for (const auto& p : c["mrope_pos_t_y_x"])
        for (const auto& v : p) mpos.push_back(v.get<int64_t>());
      in.embeddings = embd.data();  // one image chunk
      in.mrope_positions = mpos.data();
      kinds.assign(static_cast<size_t>(n), TokenKind::kVisual);
      n_past += c["n_pos"].get<int64_t>();
    }
    in.kinds = kinds.data();
    const Status st = dec.forward(in, **kv, *seq, LogitsMode::kAll, logits, pool);
    EXPECT_TRUE(st.is_ok()) << st.message();
    all.insert(all.end(), logits.begin(), logits.end());
  }
  const std::vector<float> ref = golden::read_f32(base + ".logits.f32");
  EXPECT_EQ(all.size(), ref.size());
  if (all.size() != ref.size()) return out;
  const int64_t n_rows = static_cast<int64_t>(ref.size()) / n_vocab;
  const golden::LogitDiff d = golden::compare_logits(all.data(), ref.data(), n_rows, n_vocab);
  out.prompt_max = d.max_abs;
  out.top1_ok = d.top1_agree == d.top1_considered;

  const std::vector<TokenId> gen = j["generated_tokens"].get<std::vector<TokenId>>();
  const std::vector<int64_t> gen_pos = j["generated_positions"].get<std::vector<int64_t>>();
  std::vector<float> gl(all.end() - n_vocab, all.end());
  for (size_t i = 0; i + 1 < gen.size(); ++i) {
    const TokenKind kind = TokenKind::kText;
    DecoderInput in;
    in.n_tokens = 1;
    in.tokens = &gen[i];
    in.positions = &gen_pos[i];
    in.kinds = &kind;
    EXPECT_TRUE(dec.forward(in, **kv, *seq, LogitsMode::kLast, logits, pool).is_ok());
    gl.insert(gl.end(), logits.begin(), logits.end());
  }
  const std::vector<float> ref_gen = golden::read_f32(base + ".gen_logits.f32");
  EXPECT_EQ(gl.size(), ref_gen.size());
  if (gl.size() != ref_gen.size()) return out;
  const golden::LogitDiff gd = golden::compare_logits(gl.data(), ref_gen.data(), gen.size(), n_vocab);
  out.gen_max = gd.max_abs;
  out.top1_ok = out.top1_ok && gd.top1_agree == gd.top1_considered;
  return out;
}

class Qwen3VlDecoderGolden : public testing::TestWithParam<const char*> {};

TEST_P(Qwen3VlDecoderGolden, LogitsFromFixtureEmbeddingsMatchLlamaCpp) {
  const Result2 r = run(GetParam(), Variant::kAsFile);
  std::printf("qwen3vl %s: prompt logits max abs %.3g, gen logits max abs %.3g\n", GetParam(), r.prompt_max,
              r.gen_max);
  EXPECT_LE(r.prompt_max, 1e-3);
  EXPECT_LE(r.gen_max, 1e-3);
  EXPECT_TRUE(r.top1_ok);
}

// The fixtures tell the features apart: without deepstack or with consecutive (qwen2vl)
// sections the logits after the image move far beyond the tolerance.
TEST_P(Qwen3VlDecoderGolden, DeepstackAndInterleavedSectionsMatter) {
  const Result2 no_ds = run(GetParam(), Variant::kNoDeepstack);
  const Result2 consecutive = run(GetParam(), Variant::kConsecutiveSections);
  std::printf("qwen3vl %s: without deepstack max abs %.3g; consecutive sections max abs %.3g\n", GetParam(),
              no_ds.prompt_max, consecutive.prompt_max);
  EXPECT_GT(no_ds.prompt_max, 1e-2);
  EXPECT_GT(consecutive.prompt_max, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Runs, Qwen3VlDecoderGolden, testing::Values("vlm_p1", "vlm_p1_wide"));

}  // namespace
}  // namespace vlkv
