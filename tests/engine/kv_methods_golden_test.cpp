// Compressed-cache fidelity against llama.cpp's f32-cache logits on rand-llama-hd64
// (head_dim 64): vlkv's int8 / int4 caches must do at least as well as llama.cpp's
// q8_0 / q4_0 caches (tests/data/fixtures/README.md, "What llama.cpp itself
// does": q8_0 0.26-0.34 max abs, >= 99.5% top-1; q4_0 4.0-4.2 max abs, 80-92.5% top-1).
// Prompt logits (chunks of 64: later chunks attend over the compressed cache) and the
// 32 generation steps fed the fixture's tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "golden_util.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

using golden::compare_logits;
using golden::fixtures;

struct Bar {
  const char* method;
  double max_abs;   // over all prompts, prompt and generation rows
  double mean_abs;
  double min_top1;  // worst prompt
};

// Bars: int8 / int4 at llama.cpp's q8_0 / q4_0 figures on this model (measured: int8
// 0.137 max, 0.025 mean, 99.5% top-1; int4 g32 2.03 / 0.34 / 93.8%; int4 g64 - 4.5 bits
// like q4_0 - 2.99 / 0.58 / 95.4%). kivi2 is 2-bit (3.0 bits/element with metadata, the
// recent 128 tokens in f16): measured 6.32 / 0.64 / 96.2%, with no window 11.8 / 1.23 /
// 89.5%; its bars sit a little above those measurements (regression guards).
constexpr Bar kBars[] = {
    {"int8", 0.35, 0.04, 0.99},
    {"int4", 4.2, 0.65, 0.90},
    {"int4:g=64", 4.2, 0.65, 0.90},
    {"kivi2", 8.0, 0.75, 0.93},
    {"kivi2:residual=0", 14.0, 1.4, 0.85},
};

class KvMethodGolden : public testing::TestWithParam<Bar> {};

TEST_P(KvMethodGolden, RandLlamaHd64AgainstF32Cache) {
  const Bar bar = GetParam();
  EngineParams p;
  p.model_path = fixtures() + "/models/rand-llama-hd64.gguf";
  p.kv_method = bar.method;
  p.kv_budget_bytes = 256ull << 20;
  p.n_threads = 2;
  p.n_batch = 64;
  auto engine = Engine::load(p);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  const std::string dir = fixtures() + "/text/rand-llama-hd64/kv-f32_fa-off";
  double max_abs = 0, mean_abs = 0, worst_top1 = 1.0;
  for (const char* prompt : {"p1_short", "p2_medium", "p3_long"}) {
    const nlohmann::json j = golden::read_json(dir + "/" + prompt + ".json");
    const auto prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
    const auto gen_tokens = j["generated_tokens"].get<std::vector<int32_t>>();
    const int64_t n_vocab = j["n_vocab"].get<int64_t>();
    const auto ref_prompt = golden::read_f32(dir + "/" + prompt + ".prompt_logits.f32");
    const auto ref_gen = golden::read_f32(dir + "/" + prompt + ".gen_logits.f32");
    auto session = (*engine)->new_session();
    ASSERT_TRUE(session.is_ok());
    std::vector<float> logits;
    ASSERT_TRUE((*session)->eval(prompt_tokens, true, &logits).is_ok());
    ASSERT_EQ(logits.size(), ref_prompt.size());
    std::vector<float> gen(logits.end() - n_vocab, logits.end());
    for (size_t i = 0; i + 1 < gen_tokens.size(); ++i) {
      std::vector<float> step;
      ASSERT_TRUE((*session)->eval({gen_tokens[i]}, false, &step).is_ok());
      gen.insert(gen.end(), step.begin(), step.end());
    }
    for (const auto& [ours, ref, rows] :
         {std::tuple{&logits, &ref_prompt, prompt_tokens.size()}, std::tuple{&gen, &ref_gen, gen_tokens.size()}}) {
      const golden::LogitDiff d = compare_logits(ours->data(), ref->data(), rows, n_vocab);
      max_abs = std::max(max_abs, d.max_abs);
      mean_abs = std::max(mean_abs, d.mean_abs);
      worst_top1 = std::min(worst_top1, static_cast<double>(d.top1_agree) / d.top1_considered);
    }
  }
  std::printf("[ %s ] rand-llama-hd64 vs f32 cache: max abs %.3f, mean abs %.4f, worst top-1 %.1f%%\n",
              bar.method, max_abs, mean_abs, 100.0 * worst_top1);
  EXPECT_LE(max_abs, bar.max_abs);
  EXPECT_LE(mean_abs, bar.mean_abs);
  EXPECT_GE(worst_top1, bar.min_top1);
}

INSTANTIATE_TEST_SUITE_P(Methods, KvMethodGolden, testing::ValuesIn(kBars), [](const auto& info) {
  std::string s = info.param.method;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
});

}  // namespace
}  // namespace vlkv
