// Gemma 3 (gemma3 projector, gemma3 text arch) at the level a user sees, against llama.cpp
// (README-batch2): `vlkv run --image` prompt chunks, n_positions and greedy bytes up to the
// first near-tie step, for both fixture images; then every registered KV method on the same
// question (a greedy run that holds KV bytes, or a clear refusal).
#include <gtest/gtest.h>

#include "kv/method_registry.h"
#include "vlm_batch2_golden.h"

namespace vlkv {
namespace {

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (const MethodInfo* m : list_methods()) out.push_back(m->name);
  return out;
}

const batch2::Family kGemma3{"gemma3", "gemma3-tiny-text.gguf", "mmproj-tiny-gemma3.gguf", /*mrope=*/false};

TEST(CliVlmGemma3Golden, SquareImageMatchesLlamaCpp) { batch2::expect_run_matches_llama_cpp(kGemma3, "vlm_p1"); }

TEST(CliVlmGemma3Golden, WideImageMatchesLlamaCpp) { batch2::expect_run_matches_llama_cpp(kGemma3, "vlm_p1_wide"); }

// Every registered KV method runs the image question greedily on gemma3 (sliding-window
// layers, non-causal image) and holds KV bytes; the prompt (41 tokens) is longer than the
// window (8), so every local layer attends over keys that left its window.
TEST(CliVlmGemma3Golden, EveryKvMethodRunsOnGemma3) {
  const std::string models = batch2::fixtures() + "/models/";
  Result<Image> img = load_image(batch2::fixtures() + "/images/test_image_64.png");
  ASSERT_TRUE(img.is_ok());
  const std::string text = batch2::read_file(batch2::fixtures() + "/prompts/vlm_p1.txt");
  for (const std::string& method : method_names()) {
    SCOPED_TRACE(method);
    EngineParams p;
    p.model_path = models + kGemma3.text_model;
    p.mmproj_path = models + kGemma3.mmproj;
    p.kv_method = method;
    p.kv_budget_bytes = 64ull << 20;
    p.n_threads = 2;
    Result<std::unique_ptr<Engine>> e = Engine::load(p);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    Result<std::unique_ptr<Session>> s = (*e)->new_session();
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    const Prompt prompt = (*e)->user_prompt(text, {MediaItem{{*img}, false}}, /*use_template=*/false);
    GenerateParams g;
    g.max_tokens = 8;
    g.ignore_eos = true;
    g.sampling.temperature = 0;
    std::string got;
    GenerateStats stats;
    const Status st = (*s)->generate(prompt, g, [&](const std::string& piece) { got += piece; return true; }, &stats);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(stats.n_generated, 8);
    EXPECT_GT((*s)->kv_stored_bytes(), 0.0);
    EXPECT_GT((*e)->kv_bytes_in_use(), 0u);
  }
}

}  // namespace
}  // namespace vlkv
