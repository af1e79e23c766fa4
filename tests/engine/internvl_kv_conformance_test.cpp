// Every registered KV method on the InternVL pair (internvl projector, qwen2 text): a greedy
// image question runs without error and the cache holds bytes; the framing tokens <img> and
// </img> are special tokens (not visual, not text) for the methods that look at token kinds
// (VidKV and Q Cache's visual-text similarity use only text-kind tokens for the text side).
#include <gtest/gtest.h>

#include <memory>

#include "gguf/gguf_reader.h"
#include "golden_util.h"
#include "kv/method_registry.h"
#include "text/tokenizer.h"
#include "vlkv/engine.h"
#include "vlkv/scheduler.h"

namespace vlkv {
namespace {

std::string models() { return golden::fixtures() + "/models/"; }

TEST(InternvlKvConformance, EveryMethodRunsAGreedyImageQuestion) {
  Result<Image> img = load_image(golden::fixtures() + "/images/test_image_128x48.png");
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  const std::vector<const MethodInfo*> methods = list_methods();
  ASSERT_FALSE(methods.empty());
  for (const MethodInfo* m : methods) {
    // A wrapper without a storage method of its own runs around f16.
    const std::string spec = m->create ? m->name : m->name + "+f16";
    SCOPED_TRACE(spec);
    EngineParams p;
    p.model_path = models() + "internvl-tiny-text.gguf";
    p.mmproj_path = models() + "mmproj-tiny-internvl.gguf";
    p.kv_method = spec;
    p.kv_budget_bytes = 64ull << 20;
    p.n_threads = 2;
    Result<std::unique_ptr<Engine>> e = Engine::load(p);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    Result<std::unique_ptr<Session>> s = (*e)->new_session();
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    const Prompt prompt = (*e)->user_prompt("What does it show?", {MediaItem{{*img}, false}}, false);
    GenerateParams g;
    g.max_tokens = 8;
    g.ignore_eos = true;
    g.sampling.temperature = 0;
    GenerateStats stats;
    std::string out;
    const Status st = (*s)->generate(prompt, g, [&](const std::string& piece) { out += piece; return true; }, &stats);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(stats.n_visual_tokens, 36);  // 4x2 tiles + overview, 4 tokens each
    EXPECT_EQ(stats.n_generated, 8);
    EXPECT_FALSE(out.empty());
    const uint64_t held = (*e)->kv_bytes_in_use();
    EXPECT_GT(held, 0u);
    std::printf("internvl %-12s %8llu KV bytes held after %lld prompt + 8 generated tokens\n", spec.c_str(),
                static_cast<unsigned long long>(held), static_cast<long long>(stats.n_prompt_tokens));
  }
}

// Two image requests (2x2 and 4x2 tiles) batched through the scheduler give what each gives
// alone through Session::generate.
TEST(InternvlKvConformance, BatchedImageRequestsEqualSessions) {
  EngineParams p;
  p.model_path = models() + "internvl-tiny-text.gguf";
  p.mmproj_path = models() + "mmproj-tiny-internvl.gguf";
  p.kv_method = "kivi2";
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  GenerateParams g;
  g.max_tokens = 12;
  g.ignore_eos = true;
  g.sampling.temperature = 0;
  std::vector<Prompt> prompts;
  for (const char* name : {"test_image_64.png", "test_image_128x48.png"}) {
    Result<Image> img = load_image(golden::fixtures() + "/images/" + name);
    ASSERT_TRUE(img.is_ok()) << img.status().message();
    prompts.push_back((*e)->user_prompt("Once upon a time, there was a picture:<__media__>It showed a",
                                        {MediaItem{{*img}, false}}, false));
  }
  auto sched = Scheduler::create(**e);
  ASSERT_TRUE(sched.is_ok());
  std::vector<RequestId> ids;
  for (const Prompt& pr : prompts) {
    Result<PreparedPrompt> prepared = (*e)->prepare_prompt(pr, /*add_bos=*/true);
    ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
    Request r;
    r.prepared = std::make_shared<const PreparedPrompt>(std::move(prepared).value());
    r.generate = g;
    Result<RequestId> id = (*sched)->submit(r);
    ASSERT_TRUE(id.is_ok()) << id.status().message();
    ids.push_back(*id);
  }
  EXPECT_EQ((*sched)->step().value().n_sequences, 2);
  for (int i = 0; i < 10000 && !(*sched)->idle(); ++i) ASSERT_TRUE((*sched)->step().is_ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestStatus st = (*sched)->poll(ids[i]).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    auto s = (*e)->new_session();
    ASSERT_TRUE(s.is_ok());
    std::string alone;
    ASSERT_TRUE((*s)->generate(prompts[i], g, [&](const std::string& piece) { alone += piece; return true; }, nullptr)
                    .is_ok());
    EXPECT_EQ(st.text, alone) << "request " << i;
  }
}

TEST(InternvlKvConformance, ImageFramingTokensAreSpecial) {
  Result<std::unique_ptr<GgufFile>> g = GgufFile::open(models() + "internvl-tiny-text.gguf");
  ASSERT_TRUE(g.is_ok());
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(**g);
  ASSERT_TRUE(tok.is_ok());
  for (const char* piece : {"<img>", "</img>"}) {
    const std::vector<int32_t> ids = (*tok)->encode(piece, false, /*parse_special=*/true);
    ASSERT_EQ(ids.size(), 1u) << piece;
    // The session and the scheduler give kControl tokens TokenKind::kSpecial, and the
    // visual-text similarity skips them.
    EXPECT_EQ((*tok)->token_type(ids[0]), TokenType::kControl) << piece;
  }
}

}  // namespace
}  // namespace vlkv
