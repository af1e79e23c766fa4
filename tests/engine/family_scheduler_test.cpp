// Every second-batch VLM family through the Scheduler (what `vlkv serve` runs), under f16 and a
// compressed method: two image requests batched together — LLaVA-NeXT tiles, InternVL's <img>
// runs, Qwen M-RoPE (and Qwen3-VL's deepstack rows), Gemma 3's non-causal image step and its
// sliding-window layers — give the same sampled text as Session::generate on each prompt alone.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/scheduler.h"

namespace vlkv {
namespace {

std::string fixture(const std::string& rel) { return std::string(VLKV_TEST_DATA) + "/fixtures/" + rel; }

struct FamilyPair {
  const char* name;
  const char* text_model;
  const char* mmproj;
};

const FamilyPair kFamilies[] = {
    {"llava16", "stories260K.gguf", "mmproj-tiny-llava16.gguf"},
    {"qwen25vl", "qwen25vl-tiny-text.gguf", "mmproj-tiny-qwen25vl.gguf"},
    {"qwen3vl", "qwen3vl-tiny-text.gguf", "mmproj-tiny-qwen3vl.gguf"},
    {"gemma3", "gemma3-tiny-text.gguf", "mmproj-tiny-gemma3.gguf"},
    {"internvl", "internvl-tiny-text.gguf", "mmproj-tiny-internvl.gguf"},
};

class FamilyScheduler : public testing::TestWithParam<std::tuple<FamilyPair, const char*>> {};

TEST_P(FamilyScheduler, BatchedImageRequestsEqualSessionGenerate) {
  const auto& [fam, kv] = GetParam();
  EngineParams p;
  p.model_path = fixture(std::string("models/") + fam.text_model);
  p.mmproj_path = fixture(std::string("models/") + fam.mmproj);
  p.kv_method = kv;
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  auto e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  Result<Image> square = load_image(fixture("images/test_image_64.png"));
  Result<Image> wide = load_image(fixture("images/test_image_128x48.png"));
  ASSERT_TRUE(square.is_ok() && wide.is_ok());
  // Seeded sampling over the full distribution: its draws follow small logit changes.
  GenerateParams g;
  g.max_tokens = 20;
  g.ignore_eos = true;
  g.sampling.temperature = 1.5f;
  g.sampling.top_k = 0;
  g.sampling.top_p = 1.0f;
  g.sampling.min_p = 0.0f;
  g.sampling.seed = 5;
  const Prompt prompts[] = {
      (*e)->user_prompt("Describe the image.", {MediaItem{{*square}, false}}, /*use_template=*/false),
      (*e)->user_prompt("Some words first, then " + std::string(kMediaMarker) + " and what is it?",
                        {MediaItem{{*wide}, false}}, /*use_template=*/false)};
  auto sched = Scheduler::create(**e);
  ASSERT_TRUE(sched.is_ok());
  std::vector<RequestId> ids;
  for (const Prompt& pr : prompts) {
    Result<PreparedPrompt> prepared = (*e)->prepare_prompt(pr, /*add_bos=*/true);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
    Request r;
    r.prepared = std::make_shared<const PreparedPrompt>(std::move(prepared).value());
    r.generate = g;
    ids.push_back((*sched)->submit(std::move(r)).value());
  }
  for (int i = 0; i < 100000 && !(*sched)->idle(); ++i) ASSERT_TRUE((*sched)->step().is_ok());
  ASSERT_TRUE((*sched)->idle());
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestStatus st = (*sched)->poll(ids[i]).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    auto s = (*e)->new_session();
    ASSERT_TRUE(s.is_ok());
    std::string alone;
    ASSERT_TRUE((*s)->generate(prompts[i], g, [&](const std::string& x) { alone += x; return true; }, nullptr).is_ok());
    EXPECT_EQ(st.text, alone) << fam.name << " " << kv << " request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyScheduler,
                         testing::Combine(testing::ValuesIn(kFamilies), testing::Values("f16", "kivi2")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace vlkv
