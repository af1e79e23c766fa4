// tinyvlm-shapes against llama.cpp on the first 50 eval items (the full 200 run
// in vlm_tinyvlm_slow_test.cpp, ctest label "slow"): prompt token ids exact,
// greedy answers equal on >= 99% with f32 and f16 caches.
#include "vlm_tinyvlm_util.h"

namespace vlkv {
namespace {

class TinyVlm : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyVlm, First50ItemsMatchLlamaCpp) {
  std::unique_ptr<Engine> e = tinyvlm::load_engine(GetParam());
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->has_vision());
  EXPECT_EQ(e->projector_type(), "mlp");
  EXPECT_EQ(e->info().chat_template, "vicuna");
  const tinyvlm::EvalTotals t = tinyvlm::run_items(*e, 0, 50);
  tinyvlm::report(GetParam(), t);
  EXPECT_EQ(t.n, 50);
  EXPECT_EQ(t.prompt_match, t.n);
  EXPECT_GE(t.answer_match, t.n * 99 / 100);
  EXPECT_EQ(t.correct, t.reference_correct) << "accuracy differs from llama.cpp's on these items";
}

INSTANTIATE_TEST_SUITE_P(Kv, TinyVlm, ::testing::Values("f32", "f16"));

}  // namespace
}  // namespace vlkv
