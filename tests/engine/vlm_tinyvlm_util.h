// Runs tinyvlm-shapes (the bundled LLaVA-style VLM) over its eval items and
// compares with llama.cpp's reference outputs (tests/data/vlm/tinyvlm).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vlkv/engine.h"

namespace vlkv::tinyvlm {

inline std::string data_dir() { return std::string(VLKV_TEST_DATA) + "/vlm/tinyvlm"; }
inline std::string model_path() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes.gguf"; }
inline std::string mmproj_path() { return std::string(VLKV_SOURCE_DIR) + "/models/tinyvlm-shapes-mmproj.gguf"; }

inline std::vector<nlohmann::json> reference_items() {
  std::ifstream f(data_dir() + "/reference_outputs.jsonl");
  std::vector<nlohmann::json> items;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty()) items.push_back(nlohmann::json::parse(line));
  }
  return items;
}

inline std::unique_ptr<Engine> load_engine(const std::string& kv_method) {
  EngineParams p;
  p.model_path = model_path();
  p.mmproj_path = mmproj_path();
  p.kv_method = kv_method;
  p.kv_budget_bytes = 64ull << 20;
  Result<std::unique_ptr<Engine>> e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(e).value() : nullptr;
}

struct EvalTotals {
  int n = 0;
  int prompt_match = 0;   // prompt token ids equal llama.cpp's (image run as -n_tokens)
  int answer_match = 0;   // greedy answer equals llama.cpp's
  int correct = 0;        // answer equals the ground truth
  int reference_correct = 0;
};

// Items [begin, end) through engine e with greedy decoding.
inline EvalTotals run_items(Engine& e, size_t begin, size_t end) {
  const std::vector<nlohmann::json> items = reference_items();
  EXPECT_EQ(items.size(), 200u);
  EvalTotals t;
  for (size_t i = begin; i < std::min(end, items.size()); ++i) {
    const nlohmann::json& it = items[i];
    Result<Image> img = load_image(data_dir() + "/" + it["image"].get<std::string>());
    EXPECT_TRUE(img.is_ok()) << img.status().message();
    if (!img.is_ok()) continue;
    Prompt prompt;
    prompt.text = e.apply_chat_template(std::string(kMediaMarker) + it["question"].get<std::string>());
    prompt.media.push_back(MediaItem{{std::move(img).value()}, false});

    Result<PreparedPrompt> prepared = e.prepare_prompt(prompt, /*add_bos=*/true);
    EXPECT_TRUE(prepared.is_ok()) << prepared.status().message();
    if (!prepared.is_ok()) continue;
    std::vector<int64_t> ids;  // llama.cpp's notation: an image run is one entry -n_tokens
    for (const PromptChunk& c : prepared->chunks) {
      if (c.kind == PromptChunk::Kind::kMedia) ids.push_back(-c.n_tokens);
      else ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
    }
    const std::vector<int64_t> ref_ids = it["prompt_tokens"].get<std::vector<int64_t>>();
    t.prompt_match += ids == ref_ids;
    EXPECT_EQ(ids, ref_ids) << "item " << i;

    Result<std::unique_ptr<Session>> s = e.new_session();
    EXPECT_TRUE(s.is_ok());
    if (!s.is_ok()) continue;
    std::vector<float> logits;
    Status st = (*s)->eval_prompt(*prepared, &logits);
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (!st.is_ok()) continue;
    std::vector<int32_t> answer;
    const int64_t n_vocab = (*s)->n_vocab();
    for (int step = 0; step < 64; ++step) {
      int32_t best = 0;
      for (int64_t v = 1; v < n_vocab; ++v) best = logits[v] > logits[best] ? static_cast<int32_t>(v) : best;
      if (e.is_end_of_generation(best)) break;
      answer.push_back(best);
      if (!(*s)->eval({best}, false, &logits).is_ok()) break;
    }
    std::string text;
    for (int32_t id : answer) text += e.token_to_piece(id);
    if (!text.empty() && text[0] == ' ') text.erase(0, 1);
    const std::vector<int32_t> ref_answer = it["model_tokens"].get<std::vector<int32_t>>();
    t.answer_match += answer == ref_answer;
    if (answer != ref_answer && std::getenv("VLKV_TINYVLM_VERBOSE")) {
      std::printf("item %zu: '%s' vs llama.cpp '%s'\n", i, text.c_str(), it["model_answer"].get<std::string>().c_str());
    }
    t.correct += text == it["answer"].get<std::string>();
    t.reference_correct += it["correct"].get<bool>();
    ++t.n;
  }
  return t;
}

inline void report(const char* name, const EvalTotals& t) {
  std::printf("%s: %d items | prompt ids %d/%d | answers equal to llama.cpp %d/%d | accuracy %.1f%% "
              "(llama.cpp %.1f%%)\n",
              name, t.n, t.prompt_match, t.n, t.answer_match, t.n, 100.0 * t.correct / std::max(t.n, 1),
              100.0 * t.reference_correct / std::max(t.n, 1));
}

}  // namespace vlkv::tinyvlm
