// Conversation (include/vlkv/conversation.h) on the bundled text model: what happens at the
// edges a terminal chat meets. The answers themselves are checked against llama-mtmd-cli's
// chat mode in tests/tools/cli_chat_test.cpp.
#include "vlkv/conversation.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace vlkv {
namespace {

std::unique_ptr<Engine> load(int64_t n_ctx) {
  EngineParams p;
  p.model_path = std::string(VLKV_SOURCE_DIR) + "/models/stories260K.gguf";
  p.n_threads = 1;
  p.n_ctx = n_ctx;
  p.exact_matmul = true;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

// stories260K has no chat template: texts as given.
std::unique_ptr<Conversation> start_plain(Engine& e, const std::string& kv_method = "") {
  ConversationOptions o;
  o.use_template = false;
  o.kv_method = kv_method;
  Result<std::unique_ptr<Conversation>> c = Conversation::start(e, o);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? std::move(c).value() : nullptr;
}

GenerateParams greedy(int64_t max_tokens) {
  GenerateParams g;
  g.max_tokens = max_tokens;
  g.sampling.temperature = 0;
  return g;
}

std::string ask(Conversation& c, const std::string& message, int64_t max_tokens, Status* status = nullptr) {
  std::string out;
  const Status s = c.ask(message, {}, greedy(max_tokens), [&](const std::string& p) { out += p; return true; }, nullptr);
  if (status) *status = s;
  else EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

// The cache holds each turn once: turn 2 evaluates only its own tokens, and moving the
// conversation to a method by evaluating it again (as /kv does) leaves the same tokens in the
// cache and gives the same next answer (f16 both times; exact matmuls: the prefill and the
// token-by-token decode differ in summation order only, ~1e-6, far below the top-2 gaps of
// these greedy steps).
TEST(Conversation, TurnsReuseTheCacheAndEvaluatingAgainGivesTheSameAnswer) {
  std::unique_ptr<Engine> e = load(512);
  ASSERT_TRUE(e);
  std::unique_ptr<Conversation> a = start_plain(*e), b = start_plain(*e);
  ASSERT_TRUE(a && b);
  for (Conversation* c : {a.get(), b.get()}) {
    TurnStats st;
    ASSERT_TRUE(c->ask("Once upon a time", {}, greedy(12), nullptr, &st).is_ok());
    EXPECT_EQ(st.n_cached_tokens, 0);
    ASSERT_TRUE(c->ask(" The dog", {}, greedy(12), nullptr, &st).is_ok());
    // every generated token is in the cache (the last one evaluated after the answer), as llama-mtmd-cli
    EXPECT_EQ(st.n_cached_tokens, c->session().n_past() - st.generation.n_prompt_tokens - st.generation.n_generated);
    EXPECT_LE(st.generation.n_prompt_tokens, 4);
  }
  const int64_t n = b->session().n_past();
  ASSERT_TRUE(b->switch_kv_method("f16").is_ok());
  EXPECT_EQ(b->session().n_past(), n);
  EXPECT_EQ(b->turns().size(), 4u);
  EXPECT_EQ(ask(*a, " Then", 16), ask(*b, " Then", 16));
}

// Running out of context while answering keeps the answer so far (the error says so); the
// next question is refused without changing anything; /clear starts over.
TEST(Conversation, ContextFullCutsTheAnswerAndKeepsTheConversation) {
  std::unique_ptr<Engine> e = load(40);
  ASSERT_TRUE(e);
  std::unique_ptr<Conversation> c = start_plain(*e);
  ASSERT_TRUE(c);
  Status s;
  // The answer stops where the context is full: a length stop, not an error (issue 40).
  const std::string answer = ask(*c, "Once upon a time", 100, &s);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_FALSE(answer.empty());
  EXPECT_EQ(c->turns().size(), 2u);
  EXPECT_EQ(c->session().n_past(), 40);
  ask(*c, " Then the dog", 4, &s);
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(c->turns().size(), 2u);
  EXPECT_EQ(c->session().n_past(), 40);
  ASSERT_TRUE(c->clear().is_ok());
  EXPECT_EQ(c->session().n_past(), 0);
  EXPECT_FALSE(ask(*c, "Once upon a time", 4).empty());
}

TEST(Conversation, ABadMethodChangesNothing) {
  std::unique_ptr<Engine> e = load(512);
  ASSERT_TRUE(e);
  std::unique_ptr<Conversation> c = start_plain(*e);
  ASSERT_TRUE(c);
  ask(*c, "Once upon a time", 8);
  const int64_t n = c->session().n_past();
  const Status s = c->switch_kv_method("nosuchmethod");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(c->kv_method(), "");
  EXPECT_EQ(c->session().n_past(), n);
  ConversationOptions o;
  o.kv_method = "kivi:bits=9";
  EXPECT_FALSE(Conversation::start(*e, o).is_ok());
}

}  // namespace
}  // namespace vlkv
