// Every registered KV method on LLaVA-NeXT (stories260K + mmproj-tiny-llava16: 5 tiles of
// visual tokens, head_dim 8): a greedy image question runs without error and the session
// holds KV bytes, or the method is refused at load with an error that says why (e.g. a
// channel group that head_dim 8 cannot hold) - never run silently wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kv/method_registry.h"
#include "vlkv/engine.h"

namespace vlkv {
namespace {

std::string fixtures() { return std::string(VLKV_TEST_DATA) + "/fixtures"; }

TEST(VlmLlava16KvMethods, EveryMethodRunsOrIsRefusedClearly) {
  Result<Image> img = load_image(fixtures() + "/images/test_image_64.png");
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  // Every method with its defaults, and each wrapping method over vidkv (the papers' pairing).
  std::vector<std::string> specs;
  for (const MethodInfo* m : list_methods()) {
    specs.push_back(m->name);
    if (m->wrap) specs.push_back(m->name + "+vidkv");
  }
  int n_ran = 0;
  for (const std::string& spec : specs) {
    SCOPED_TRACE(spec);
    EngineParams p;
    p.model_path = fixtures() + "/models/stories260K.gguf";
    p.mmproj_path = fixtures() + "/models/mmproj-tiny-llava16.gguf";
    p.kv_method = spec;
    p.kv_budget_bytes = 64ull << 20;
    p.n_threads = 2;
    Result<std::unique_ptr<Engine>> e = Engine::load(p);
    if (!e.is_ok()) {
      const Status& st = e.status();
      EXPECT_TRUE(st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kUnsupported)
          << st.message();
      EXPECT_NE(st.message().find(spec.substr(0, spec.find('+'))), std::string::npos)
          << "refusal must name the method: " << st.message();
      std::printf("llava16 kv %-16s refused: %s\n", spec.c_str(), st.message().c_str());
      continue;
    }
    const Prompt prompt =
        (*e)->user_prompt("Once upon a time, there was a picture:<__media__>It showed a", {MediaItem{{*img}, false}},
                          /*use_template=*/false);
    Result<std::unique_ptr<Session>> s = (*e)->new_session();
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    GenerateParams g;
    g.max_tokens = 8;
    g.ignore_eos = true;
    g.sampling.temperature = 0;
    std::string text;
    GenerateStats stats;
    const Status st = (*s)->generate(prompt, g, [&](const std::string& piece) { text += piece; return true; }, &stats);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(stats.n_prompt_tokens, 103);  // 16 text + 5 x 16 visual + 7 text
    EXPECT_EQ(stats.n_visual_tokens, 80);
    EXPECT_EQ(stats.n_generated, 8);
    EXPECT_GT((*s)->kv_stored_bytes(), 0.0);
    std::printf("llava16 kv %-16s ran: %.0f bytes stored, \"%s\"\n", spec.c_str(), (*s)->kv_stored_bytes(),
                text.c_str());
    ++n_ran;
  }
  EXPECT_GT(n_ran, 0);
}

}  // namespace
}  // namespace vlkv
