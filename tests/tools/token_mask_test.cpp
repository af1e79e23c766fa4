// The constrained-decoding mask on the bundled models' real vocabularies: the prefix-sharing
// walk (allowed_tokens) gives exactly what trying each token on its own gives, from several
// grammar states; and its cost per generated token (printed; bounded loosely so a
// pathological slowdown fails).
#include "server/token_mask.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

namespace vlkv::server {
namespace {

using nlohmann::json;

class TokenMaskOnModel : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenMaskOnModel, WalkEqualsTokenByTokenAndCost) {
  EngineParams p;
  p.model_path = std::string(VLKV_SOURCE_DIR) + "/models/" + GetParam();
  p.n_threads = 1;
  p.kv_budget_bytes = 4u << 20;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const TokenTable> table = TokenTable::build(**e);
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Result<JsonGrammar> schema = compile_json_schema(
      {{"type", "object"},
       {"properties", {{"name", {{"type", "string"}}}, {"n", {{"type", "integer"}}}, {"tags", {{"type", "array"}}}}},
       {"required", {"name"}}});
  ASSERT_TRUE(schema.is_ok());
  const JsonGrammar object = json_object_grammar();
  const std::pair<const JsonGrammar*, std::string> states[] = {
      {&object, ""}, {&object, "{"}, {&object, "{\"ke"}, {&object, "{\"a\": [1, {\"b\": tr"}, {&object, "{\"a\":\"caf\xc3"},
      {&*schema, ""}, {&*schema, "{\"na"}, {&*schema, "{\"name\": \"x\", "}, {&*schema, "{\"n\": -1"},
  };
  std::vector<JsonRecognizer> scratch;
  std::vector<uint8_t> allowed;
  double walk_ms = 0;
  int n_walks = 0;
  for (const auto& [g, text] : states) {
    JsonRecognizer r(*g);
    ASSERT_TRUE(r.feed(text)) << text;
    const auto w0 = std::chrono::steady_clock::now();
    const int reps = 20;
    for (int i = 0; i < reps; ++i) allowed_tokens(*table, r, scratch, &allowed);
    walk_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
    n_walks += reps;
    int n_allowed = 0;
    for (size_t id = 0; id < table->pieces.size(); ++id) {
      JsonRecognizer one = r;
      const bool expect = !table->pieces[id].empty() && one.feed(table->pieces[id]);
      EXPECT_EQ(allowed[id] != 0, expect) << text << " + token " << id << " '" << table->pieces[id] << "'";
      n_allowed += expect;
    }
    EXPECT_GT(n_allowed, 0) << text;
  }
  const double per_token_ms = walk_ms / n_walks;
  std::printf("[ cost ] %s: %zu tokens, table built in %.2f ms, mask %.3f ms per generated token\n", GetParam(),
              table->pieces.size(), build_ms, per_token_ms);
  EXPECT_LT(per_token_ms, 50.0);  // loose: a 512-token vocabulary takes well under 1 ms
}

INSTANTIATE_TEST_SUITE_P(Models, TokenMaskOnModel, ::testing::Values("stories260K.gguf", "tinyvlm-shapes.gguf"));

}  // namespace
}  // namespace vlkv::server
