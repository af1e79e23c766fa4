// `vlkv run --image` on Qwen3-VL (qwen3vl text arch + qwen3vl_merger) against llama.cpp
// (tests/data/fixtures/vlm/qwen3vl, README-batch2): chunks, n_positions and greedy bytes up to
// the first near-tie step (vlm_batch2_golden.h); then every registered KV method on the same
// question: it runs greedy without error and holds KV bytes, or is refused with a message.
#include <gtest/gtest.h>

#include "kv/method_registry.h"
#include "vlm_batch2_golden.h"

namespace vlkv {
namespace {

const batch2::Family kQwen3Vl{"qwen3vl", "qwen3vl-tiny-text.gguf", "mmproj-tiny-qwen3vl.gguf", /*mrope=*/true};

TEST(CliVlmQwen3VlGolden, SquareImageMatchesLlamaCpp) { batch2::expect_run_matches_llama_cpp(kQwen3Vl, "vlm_p1"); }

TEST(CliVlmQwen3VlGolden, WideImageMatchesLlamaCpp) { batch2::expect_run_matches_llama_cpp(kQwen3Vl, "vlm_p1_wide"); }

class Qwen3VlKvMethods : public testing::TestWithParam<std::string> {};

TEST_P(Qwen3VlKvMethods, GreedyImageQuestionRunsAndHoldsBytes) {
  const std::string models = batch2::fixtures() + "/models/";
  EngineParams p;
  p.model_path = models + kQwen3Vl.text_model;
  p.mmproj_path = models + kQwen3Vl.mmproj;
  p.kv_method = GetParam();
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << GetParam() << ": " << e.status().message();
  Result<Image> img = load_image(batch2::fixtures() + "/images/test_image_128x48.png");
  ASSERT_TRUE(img.is_ok());
  const std::string text = batch2::read_file(batch2::fixtures() + "/prompts/vlm_p1.txt");
  const Prompt prompt = (*e)->user_prompt(text, {MediaItem{{*img}, false}}, /*use_template=*/false);
  Result<std::unique_ptr<Session>> s = (*e)->new_session();
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  GenerateParams g;
  g.max_tokens = 8;
  g.ignore_eos = true;
  g.sampling.temperature = 0;
  int n_pieces = 0;
  GenerateStats stats;
  const Status st = (*s)->generate(prompt, g, [&](const std::string&) { ++n_pieces; return true; }, &stats);
  ASSERT_TRUE(st.is_ok()) << GetParam() << ": " << st.message();
  EXPECT_EQ(n_pieces, 8);
  EXPECT_EQ(stats.n_prompt_tokens, 33);
  EXPECT_GT((*s)->kv_stored_bytes(), 0.0) << GetParam();
}

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (const MethodInfo* m : list_methods()) out.push_back(m->name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registered, Qwen3VlKvMethods, testing::ValuesIn(method_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace vlkv
