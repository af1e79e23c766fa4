// VidKV's visual-to-text similarity in the engine: the numbers (against a brute-force
// mean of dot products on tinyvlm-shapes), the cache's "does the method read it" query,
// and, end to end, vidkv keeping salient visual tokens (its 2-bit value segments) only
// when the engine passes the similarity.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/visual_similarity.h"
#include "gguf/gguf_reader.h"
#include "kv/kv_cache.h"
#include "text/hparams.h"
#include "text/text_weights.h"
#include "text/tokenizer.h"
#include "vlm_tinyvlm_util.h"

namespace vlkv {
namespace {

Prompt image_prompt(const Engine& e, const std::string& question) {
  Result<Image> img = load_image(std::string(VLKV_SOURCE_DIR) + "/models/demo/026.png");
  EXPECT_TRUE(img.is_ok()) << img.status().message();
  Prompt p;
  p.text = e.apply_chat_template(std::string(kMediaMarker) + question);
  if (img.is_ok()) p.media.push_back(MediaItem{{std::move(img).value()}, false});
  return p;
}

// The model file with its text hparams and weights, read independently of the engine.
struct ModelText {
  std::unique_ptr<GgufFile> g;  // owns the data the weights view
  TextHparams hp;
  TextWeights w;
};

void read_model_text(ModelText& m) {
  Result<std::unique_ptr<GgufFile>> g = GgufFile::open(tinyvlm::model_path());
  ASSERT_TRUE(g.is_ok());
  m.g = std::move(g).value();
  Result<TextHparams> hp = read_text_hparams(*m.g);
  ASSERT_TRUE(hp.is_ok());
  m.hp = std::move(hp).value();
  Result<TextWeights> w = bind_text_weights(*m.g, m.hp, false);
  ASSERT_TRUE(w.is_ok());
  m.w = std::move(w).value();
}

TEST(VisualSimilarity, EqualsTheMeanDotProductWithTheTextTokens) {
  std::unique_ptr<Engine> e = tinyvlm::load_engine("f16");
  ASSERT_TRUE(e);
  Result<PreparedPrompt> prepared = e->prepare_prompt(image_prompt(*e, "What color is the circle?"), true);
  ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
  ASSERT_GT(prepared->n_visual_tokens(), 0);

  // The model's token embeddings and token types, read independently of the engine.
  ModelText m;
  ASSERT_NO_FATAL_FAILURE(read_model_text(m));
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(*m.g);
  ASSERT_TRUE(tok.is_ok());
  auto is_text = [&](int32_t t) { return (*tok)->token_type(t) != TokenType::kControl; };
  const int64_t n_embd = m.hp.n_embd;

  std::vector<std::vector<float>> text_rows;
  for (const PromptChunk& c : prepared->chunks)
    for (int32_t t : c.tokens)
      if (c.kind == PromptChunk::Kind::kText && is_text(t)) {
        text_rows.emplace_back(static_cast<size_t>(n_embd));
        get_row(m.w.token_embd, t, text_rows.back().data());
      }
  ASSERT_GT(text_rows.size(), 3u);  // the question and the template's words; BOS excluded

  const std::vector<std::vector<float>> sim = visual_text_similarity(*prepared, m.w.token_embd, is_text);
  ASSERT_EQ(sim.size(), prepared->chunks.size());
  int64_t checked = 0;
  double spread_lo = INFINITY, spread_hi = -INFINITY;
  for (size_t i = 0; i < prepared->chunks.size(); ++i) {
    const PromptChunk& c = prepared->chunks[i];
    if (c.kind == PromptChunk::Kind::kText) {
      EXPECT_TRUE(sim[i].empty());
      continue;
    }
    ASSERT_EQ(static_cast<int64_t>(sim[i].size()), c.n_tokens);
    for (int64_t v = 0; v < c.n_tokens; ++v) {
      double sum = 0, abs_sum = 0;  // brute force: every (visual, text) pair's dot product
      for (const auto& row : text_rows) {
        for (int64_t j = 0; j < n_embd; ++j) {
          const double p = static_cast<double>(c.embeddings[v * n_embd + j]) * row[j];
          sum += p;
          abs_sum += std::fabs(p);
        }
      }
      const double n = static_cast<double>(text_rows.size());
      // Both sides accumulate in double; the result is rounded to float once: 1e-6 of the
      // terms' magnitude covers that rounding and the reassociation (mean first).
      EXPECT_NEAR(sim[i][v], sum / n, 1e-6 * abs_sum / n + 1e-7) << "visual token " << v;
      spread_lo = std::min(spread_lo, sum / n);
      spread_hi = std::max(spread_hi, sum / n);
      ++checked;
    }
  }
  EXPECT_EQ(checked, prepared->n_visual_tokens());
  EXPECT_LT(spread_lo, spread_hi);  // not a constant: it can rank tokens
}

TEST(VisualSimilarity, NoneWithoutMediaOrWithoutTextTokens) {
  std::unique_ptr<Engine> e = tinyvlm::load_engine("f16");
  ASSERT_TRUE(e);
  ModelText m;
  ASSERT_NO_FATAL_FAILURE(read_model_text(m));
  Result<PreparedPrompt> text_only = e->prepare_prompt(Prompt{"What color is the circle?", {}, {}, {}}, true);
  ASSERT_TRUE(text_only.is_ok());
  for (const auto& s : visual_text_similarity(*text_only, m.w.token_embd, [](int32_t) { return true; }))
    EXPECT_TRUE(s.empty());
  Result<PreparedPrompt> with_image = e->prepare_prompt(image_prompt(*e, "Describe."), true);
  ASSERT_TRUE(with_image.is_ok());
  for (const auto& s : visual_text_similarity(*with_image, m.w.token_embd, [](int32_t) { return false; }))
    EXPECT_TRUE(s.empty());  // no token counts as text: nothing to compare with
}

TEST(VisualSimilarity, CacheSaysWhetherTheMethodReadsIt) {
  for (const auto& [method, reads] : std::vector<std::pair<std::string, bool>>{
           {"f16", false}, {"kivi2", false}, {"vidkv", true}, {"vidkv:p=0", false}}) {
    KvCacheConfig c;
    c.geometry = {2, 4, 2, 32};
    c.method = method;
    Result<std::unique_ptr<KvCache>> kv = KvCache::create(c);
    ASSERT_TRUE(kv.is_ok()) << method << ": " << kv.status().message();
    EXPECT_EQ((*kv)->uses_visual_similarity(), reads) << method;
  }
}

struct PromptRun {
  uint64_t kv_bytes = 0;
  std::vector<float> logits;
};

PromptRun run_prompt(const std::string& method, bool with_image) {
  PromptRun r;
  std::unique_ptr<Engine> e = tinyvlm::load_engine(method);
  EXPECT_TRUE(e);
  if (!e) return r;
  const Prompt p = with_image ? image_prompt(*e, "What color is the circle?")
                              : Prompt{e->apply_chat_template("What color is the circle?"), {}, {}, {}};
  Result<PreparedPrompt> prepared = e->prepare_prompt(p, true);
  EXPECT_TRUE(prepared.is_ok());
  Result<std::unique_ptr<Session>> s = e->new_session();
  EXPECT_TRUE(s.is_ok());
  if (!prepared.is_ok() || !s.is_ok()) return r;
  EXPECT_TRUE((*s)->eval_prompt(*prepared, &r.logits).is_ok());
  r.kv_bytes = e->kv_bytes_in_use();
  return r;
}

// window=0: every whole group of 32 tokens is compressed at once, so the salient tokens'
// int2c value segment (and its staging) exist right after the prompt. p=0 is the same
// method with no salient token: the engine then skips the similarity.
TEST(VisualSimilarity, VidkvKeepsSalientVisualTokensFromTheEngine) {
  const PromptRun salient = run_prompt("vidkv:window=0", true);
  const PromptRun none = run_prompt("vidkv:window=0,p=0", true);
  ASSERT_FALSE(salient.logits.empty());
  ASSERT_EQ(salient.logits.size(), none.logits.size());
  // Salient segments hold pages of their own (K and V streams per layer and kv head).
  EXPECT_GT(salient.kv_bytes, none.kv_bytes);
  // 2-bit instead of ternary values for the salient tokens change what attention reads.
  double diff = 0;
  for (size_t i = 0; i < salient.logits.size(); ++i) diff = std::max(diff, std::fabs(double(salient.logits[i]) - none.logits[i]));
  EXPECT_GT(diff, 1e-4);

  // Control: without an image there is no visual token and p changes nothing.
  const PromptRun text_a = run_prompt("vidkv:window=0", false);
  const PromptRun text_b = run_prompt("vidkv:window=0,p=0", false);
  EXPECT_EQ(text_a.kv_bytes, text_b.kv_bytes);
  EXPECT_EQ(text_a.logits, text_b.logits);
}

}  // namespace
}  // namespace vlkv
