// Qwen3-VL through the Scheduler (what `vlkv serve` runs): two image requests batched in one
// step — M-RoPE positions and 384-wide deepstack rows laid out per request — give the same
// sampled text as Session::generate on each prompt alone.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/scheduler.h"

namespace vlkv {
namespace {

std::string fixture(const std::string& rel) { return std::string(VLKV_TEST_DATA) + "/fixtures/" + rel; }

TEST(Qwen3VlScheduler, BatchedImageRequestsEqualSessionGenerate) {
  EngineParams p;
  p.model_path = fixture("models/qwen3vl-tiny-text.gguf");
  p.mmproj_path = fixture("models/mmproj-tiny-qwen3vl.gguf");
  p.kv_method = "f16";
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  auto e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  Result<Image> square = load_image(fixture("images/test_image_64.png"));
  Result<Image> wide = load_image(fixture("images/test_image_128x48.png"));
  ASSERT_TRUE(square.is_ok() && wide.is_ok());
  // Seeded sampling over the full distribution: its draws follow small logit changes.
  GenerateParams g;
  g.max_tokens = 24;
  g.ignore_eos = true;
  g.sampling.temperature = 1.5f;
  g.sampling.top_k = 0;
  g.sampling.top_p = 1.0f;
  g.sampling.min_p = 0.0f;
  g.sampling.seed = 11;
  const Prompt prompts[] = {
      (*e)->user_prompt("Describe the image.", {MediaItem{{*square}, false}}, /*use_template=*/false),
      (*e)->user_prompt("First some text, then " + std::string(kMediaMarker) + " what is it?",
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
    EXPECT_EQ(st.text, alone) << "request " << i;
  }
}

// A Qwen2-VL projector (128-wide rows) with the Qwen3-VL text model (384-wide input rows) is
// refused at load with the widths named, never run with misread rows.
TEST(Qwen3VlScheduler, MismatchedProjectorIsRefused) {
  EngineParams p;
  p.model_path = fixture("models/qwen3vl-tiny-text.gguf");
  p.mmproj_path = fixture("models/mmproj-tiny-qwen25vl.gguf");
  p.n_threads = 1;
  auto e = Engine::load(p);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("384"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace vlkv
