// All 200 tinyvlm-shapes eval items against llama.cpp (ctest label "slow"):
// prompt token ids exact, greedy answers equal on >= 99% with f32 and f16
// caches, and the same 71.5% accuracy.
#include "vlm_tinyvlm_util.h"

namespace vlkv {
namespace {

class TinyVlmAll : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyVlmAll, All200ItemsMatchLlamaCpp) {
  std::unique_ptr<Engine> e = tinyvlm::load_engine(GetParam());
  ASSERT_NE(e, nullptr);
  const tinyvlm::EvalTotals t = tinyvlm::run_items(*e, 0, 200);
  tinyvlm::report(GetParam(), t);
  EXPECT_EQ(t.n, 200);
  EXPECT_EQ(t.prompt_match, 200);
  EXPECT_GE(t.answer_match, 198);  // >= 99%
  EXPECT_EQ(t.reference_correct, 143);
  EXPECT_NEAR(t.correct, 143, 2);  // 71.5% (+-1%)
}

INSTANTIATE_TEST_SUITE_P(Kv, TinyVlmAll, ::testing::Values("f32", "f16"));

}  // namespace
}  // namespace vlkv
