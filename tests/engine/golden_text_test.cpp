// Golden tests: vlkv's logits and greedy text against llama.cpp's on the text
// fixtures (see tests/data/fixtures/README.md for the tolerances' rationale).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "golden_util.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

using golden::compare_logits;
using golden::fixtures;

struct Tolerance {
  double max_abs;
  double mean_abs;
  double min_top1;      // fraction of considered rows
  float min_margin;     // rows whose reference margin is below this are ties
};

// f32 weights with an f32 cache vs kv-f32_fa-off: llama.cpp is within 4e-5 of float64;
// 1e-3 leaves room for a different summation order (README "How a test should compare").
constexpr Tolerance kExactF32{1e-3, 1e-4, 1.0, 0.0f};
// f16 cache vs kv-f32_fa-off: llama.cpp's own f16 caches reach 0.035 max / 0.003 mean.
constexpr Tolerance kF16Cache{0.1, 0.01, 0.99, 0.0f};

std::unique_ptr<Engine> load(const std::string& model, const std::string& kv, bool exact_matmul = true) {
  EngineParams p;
  p.exact_matmul = exact_matmul;
  p.model_path = fixtures() + "/models/" + model + ".gguf";
  p.kv_method = kv;
  p.kv_budget_bytes = 256ull << 20;
  p.n_threads = 2;
  p.n_batch = 64;  // several chunks for p3_long: exercises prefill over a cached prefix
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

// Prompt logits and the 32 generation steps (fed the fixture's own tokens).
void check_run(Engine& engine, const std::string& run_dir, const std::string& prompt, const Tolerance& tol) {
  SCOPED_TRACE(run_dir + "/" + prompt);
  const nlohmann::json j = golden::read_json(run_dir + "/" + prompt + ".json");
  const std::vector<int32_t> prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> gen_tokens = j["generated_tokens"].get<std::vector<int32_t>>();
  const int64_t n_vocab = j["n_vocab"].get<int64_t>();
  const std::vector<float> ref_prompt = golden::read_f32(run_dir + "/" + prompt + ".prompt_logits.f32");
  const std::vector<float> ref_gen = golden::read_f32(run_dir + "/" + prompt + ".gen_logits.f32");
  ASSERT_EQ(static_cast<int64_t>(ref_prompt.size()), static_cast<int64_t>(prompt_tokens.size()) * n_vocab);

  auto session = engine.new_session();
  ASSERT_TRUE(session.is_ok());
  std::vector<float> logits;
  ASSERT_TRUE((*session)->eval(prompt_tokens, true, &logits).is_ok());
  ASSERT_EQ(logits.size(), ref_prompt.size());
  golden::LogitDiff d = compare_logits(logits.data(), ref_prompt.data(), prompt_tokens.size(), n_vocab,
                                       tol.min_margin);
  EXPECT_LE(d.max_abs, tol.max_abs);
  EXPECT_LE(d.mean_abs, tol.mean_abs);
  EXPECT_GE(d.top1_agree, tol.min_top1 * d.top1_considered) << d.top1_agree << "/" << d.top1_considered;

  // Generation: row 0 of gen_logits is the last prompt row; row i+1 follows gen token i.
  std::vector<float> gen_logits(logits.end() - n_vocab, logits.end());
  for (size_t i = 0; i + 1 < gen_tokens.size(); ++i) {
    std::vector<float> step;
    ASSERT_TRUE((*session)->eval({gen_tokens[i]}, false, &step).is_ok());
    gen_logits.insert(gen_logits.end(), step.begin(), step.end());
  }
  golden::LogitDiff g = compare_logits(gen_logits.data(), ref_gen.data(), gen_tokens.size(), n_vocab, tol.min_margin);
  EXPECT_LE(g.max_abs, tol.max_abs);
  EXPECT_LE(g.mean_abs, tol.mean_abs);
  EXPECT_GE(g.top1_agree, tol.min_top1 * g.top1_considered) << g.top1_agree << "/" << g.top1_considered;
}

class GoldenText : public testing::TestWithParam<std::string> {};

TEST_P(GoldenText, F32CacheMatchesLlamaCppF32) {
  auto engine = load(GetParam(), "f32");
  ASSERT_TRUE(engine);
  for (const char* p : {"p1_short", "p2_medium", "p3_long"}) {
    check_run(*engine, fixtures() + "/text/" + GetParam() + "/kv-f32_fa-off", p, kExactF32);
  }
}

TEST_P(GoldenText, F16CacheWithinF16Thresholds) {
  auto engine = load(GetParam(), "f16");
  ASSERT_TRUE(engine);
  for (const char* p : {"p1_short", "p2_medium", "p3_long"}) {
    check_run(*engine, fixtures() + "/text/" + GetParam() + "/kv-f32_fa-off", p, kF16Cache);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenText, testing::Values("stories260K", "stories260K-hd32", "rand-llama-hd64", "qwen2vl-tiny-text"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) if (c == '-') c = '_';
                           return s;
                         });

// Weight formats. Exact dequantization + f32 math vs llama.cpp's run on its own
// dequantized f32 copy: the tight test (README: 1e-3, same greedy tokens).
// Against the quantized runs themselves llama.cpp rounds activations, so only
// the README's looser limits apply and top-1 counts where the margin >= 0.2.
class GoldenWeights : public testing::TestWithParam<std::string> {};

TEST_P(GoldenWeights, ExactDequantizationMatchesDeqRun) {
  auto engine = load("rand-llama-q-" + GetParam(), "f32");
  ASSERT_TRUE(engine);
  check_run(*engine, fixtures() + "/text/rand-llama-q-" + GetParam() + "-deq/kv-f32_fa-off", "p2_medium",
            Tolerance{1e-3, 1e-4, 1.0, 3e-4f});
}

// Limits against llama.cpp's quantized runs (README "Suggested comparison", item 3).
void check_quantized_runs(Engine& engine, const std::string& type) {
  const Tolerance tol = type == "f16"    ? Tolerance{0.005, 0.001, 1.0, 0.2f}
                        : type == "bf16" ? Tolerance{0.03, 0.005, 1.0, 0.2f}
                                         : Tolerance{0.15, 0.02, 1.0, 0.2f};
  for (const char* p : {"p1_short", "p2_medium", "p3_long"}) {
    check_run(engine, fixtures() + "/text/rand-llama-q-" + type + "/kv-f32_fa-off", p, tol);
  }
}

TEST_P(GoldenWeights, ExactMathWithinActivationRoundingLimits) {
  auto engine = load("rand-llama-q-" + GetParam(), "f32");
  ASSERT_TRUE(engine);
  check_quantized_runs(*engine, GetParam());
}

// The default (fast) decode rounds activations to 8 bits as llama.cpp does: the same
// limits hold against llama.cpp's own quantized runs.
TEST_P(GoldenWeights, RoundedActivationsWithinLimits) {
  auto engine = load("rand-llama-q-" + GetParam(), "f32", /*exact_matmul=*/false);
  ASSERT_TRUE(engine);
  check_quantized_runs(*engine, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Formats, GoldenWeights,
                         testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k",
                                         "q6_k", "q4_k_m"));

TEST(GoldenWeightsBase, F32BaseModelExact) {
  auto engine = load("rand-llama-q-base", "f32");
  ASSERT_TRUE(engine);
  for (const char* p : {"p1_short", "p2_medium", "p3_long"}) {
    check_run(*engine, fixtures() + "/text/rand-llama-q-base/kv-f32_fa-off", p, kExactF32);
  }
}

}  // namespace
}  // namespace vlkv
