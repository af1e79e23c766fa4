// Scheduler with prepared (multimodal) prompts on the bundled VLM tinyvlm-shapes: an image
// request's greedy text through the scheduler equals Session::generate on the same Prompt,
// alone, batched with another image request and a text request, and when preempted under a
// tiny budget (recomputed from the kept prepared prompt).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/scheduler.h"
#include "vlm_tinyvlm_util.h"

namespace vlkv {
namespace {

std::unique_ptr<Engine> load_vlm(uint64_t budget) {
  EngineParams p;
  p.model_path = tinyvlm::model_path();
  p.mmproj_path = tinyvlm::mmproj_path();
  p.kv_method = "f16";
  p.kv_budget_bytes = budget;
  p.kv_page_bytes = 4096;
  p.n_threads = 2;
  auto e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

// Eval item i's picture and question, as `vlkv run --image` builds the prompt.
Prompt item_prompt(const Engine& e, size_t i) {
  const nlohmann::json it = tinyvlm::reference_items().at(i);
  Result<Image> img = load_image(tinyvlm::data_dir() + "/" + it["image"].get<std::string>());
  EXPECT_TRUE(img.is_ok()) << img.status().message();
  std::vector<MediaItem> media;
  if (img.is_ok()) media.push_back(MediaItem{{std::move(img).value()}, false});
  return e.user_prompt(it["question"].get<std::string>(), std::move(media), /*use_template=*/true);
}

GenerateParams greedy(int max_tokens, bool ignore_eos) {
  GenerateParams g;
  g.max_tokens = max_tokens;
  g.ignore_eos = ignore_eos;
  g.sampling.temperature = 0.0f;
  return g;
}

// The reference: the prompt alone through Session::generate.
std::string session_text(Engine& e, const Prompt& prompt, const GenerateParams& g) {
  auto s = e.new_session();
  EXPECT_TRUE(s.is_ok());
  if (!s.is_ok()) return "";
  std::string text;
  Status st = (*s)->generate(prompt, g, [&](const std::string& piece) { text += piece; return true; }, nullptr);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return text;
}

Request prepared_request(const Engine& e, const Prompt& prompt, const GenerateParams& g) {
  Result<PreparedPrompt> prepared = e.prepare_prompt(prompt, /*add_bos=*/true);
  EXPECT_TRUE(prepared.is_ok()) << prepared.status().message();
  Request r;
  if (prepared.is_ok()) r.prepared = std::make_shared<const PreparedPrompt>(std::move(prepared).value());
  r.generate = g;
  return r;
}

void run_to_end(Scheduler& s) {
  for (int i = 0; i < 100000 && !s.idle(); ++i) ASSERT_TRUE(s.step().is_ok());
  ASSERT_TRUE(s.idle());
}

TEST(SchedulerMedia, ImageRequestEqualsSessionGenerate) {
  auto e = load_vlm(64ull << 20);
  ASSERT_TRUE(e);
  const Prompt prompt = item_prompt(*e, 0);
  const GenerateParams g = greedy(16, /*ignore_eos=*/false);
  const std::string want = session_text(*e, prompt, g);
  ASSERT_FALSE(want.empty());
  auto sched = Scheduler::create(*e);
  ASSERT_TRUE(sched.is_ok());
  const Request r = prepared_request(*e, prompt, g);
  auto id = (*sched)->submit(r);
  ASSERT_TRUE(id.is_ok()) << id.status().message();
  run_to_end(**sched);
  const RequestStatus st = (*sched)->poll(*id).value();
  EXPECT_EQ(st.reason, FinishReason::kEos) << st.error.message();
  EXPECT_EQ(st.n_prompt_tokens, r.prepared->n_tokens());
  EXPECT_EQ(st.text, want);
  EXPECT_EQ(e->kv_bytes_in_use(), 0u);
}

TEST(SchedulerMedia, TwoImageRequestsAndATextRequestBatched) {
  auto e = load_vlm(64ull << 20);
  ASSERT_TRUE(e);
  // ignore_eos: long enough answers that the three decode together for many steps.
  const GenerateParams g = greedy(24, /*ignore_eos=*/true);
  const Prompt a = item_prompt(*e, 1), b = item_prompt(*e, 7);
  const Prompt text = e->user_prompt("How many shapes are there?", {}, /*use_template=*/true);
  auto sched = Scheduler::create(*e);
  ASSERT_TRUE(sched.is_ok());
  std::vector<RequestId> ids;
  for (const Prompt* p : {&a, &b, &text}) ids.push_back((*sched)->submit(prepared_request(*e, *p, g)).value());
  const StepResult first = (*sched)->step().value();
  EXPECT_EQ(first.n_sequences, 3);  // all three prompts in one forward pass
  run_to_end(**sched);
  const Prompt* prompts[] = {&a, &b, &text};
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestStatus st = (*sched)->poll(ids[i]).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    EXPECT_EQ(st.text, session_text(*e, *prompts[i], g)) << "request " << i;
  }
  EXPECT_NE((*sched)->poll(ids[0])->text, (*sched)->poll(ids[1])->text);  // the images matter
  EXPECT_EQ(e->kv_bytes_in_use(), 0u);
}

TEST(SchedulerMedia, PreemptedImageRequestRecomputesAndMatches) {
  const GenerateParams g = greedy(96, /*ignore_eos=*/true);
  auto probe = load_vlm(64ull << 20);
  ASSERT_TRUE(probe);
  auto probe_sched = Scheduler::create(*probe);
  ASSERT_TRUE(probe_sched.is_ok());
  // Room for the three prompts' reservations but not for three grown requests: admission
  // by prompt alone starts all three (in one admission pass), and the pool runs dry while
  // they grow by 96 tokens each (the bound is loose: the pages they hold grow slower).
  uint64_t budget = 0;
  for (size_t item : {2, 3, 4}) {
    const int64_t n_prompt = probe->prepare_prompt(item_prompt(*probe, item), true)->n_tokens();
    budget += (*probe_sched)->kv_bytes_for(n_prompt + 1).value();
  }

  auto e = load_vlm(budget);
  ASSERT_TRUE(e);
  SchedulerParams sp;
  sp.reserve_max_tokens = false;
  auto sched = Scheduler::create(*e, sp);
  ASSERT_TRUE(sched.is_ok());
  std::vector<Prompt> prompts = {item_prompt(*e, 2), item_prompt(*e, 3), item_prompt(*e, 4)};
  std::vector<RequestId> ids;
  for (const Prompt& p : prompts) ids.push_back((*sched)->submit(prepared_request(*e, p, g)).value());
  int64_t peak_running = 0;
  for (int i = 0; i < 100000 && !(*sched)->idle(); ++i) {
    ASSERT_TRUE((*sched)->step().is_ok());
    const SchedulerStats st = (*sched)->stats();
    ASSERT_LE(st.kv_bytes_in_use, st.kv_budget_bytes);
    peak_running = std::max(peak_running, st.n_running);
  }
  EXPECT_EQ(peak_running, 3);
  EXPECT_GT((*sched)->stats().n_preemptions, 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestStatus st = (*sched)->poll(ids[i]).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    EXPECT_EQ(st.text, session_text(*probe, prompts[i], g)) << "request " << i << ", preempted " << st.n_preemptions;
  }
  EXPECT_EQ(e->kv_bytes_in_use(), 0u);
}

// Per-request KV methods on image prompts in one pool: each equals a Session on an engine
// of that method (vidkv reads the visual tokens' similarity to the text, which the
// scheduler computes for it although the engine's f16 does not).
TEST(SchedulerMedia, PerRequestKvMethodsOnImagePrompts) {
  auto e = load_vlm(64ull << 20);
  ASSERT_TRUE(e);
  const GenerateParams g = greedy(64, /*ignore_eos=*/true);
  SchedulerParams sp;
  // Every prompt chunk whole, as a Session feeds it: VidKV's stored bytes depend on how a
  // prefill is split (with the default 512-token step budget, 12 prompts of ~180 tokens are
  // split at other points and item 8's text drifts after ~40 tokens).
  sp.max_step_prompt_tokens = 1 << 14;
  auto sched = Scheduler::create(*e, sp);
  ASSERT_TRUE(sched.is_ok());
  const std::vector<std::string> methods = {"vidkv:p=0.5", "kivi2", "f16"};
  const size_t items[] = {5, 6, 8, 10};
  std::vector<RequestId> ids;
  for (size_t item : items)
    for (const std::string& m : methods) {
      Request r = prepared_request(*e, item_prompt(*e, item), g);
      r.kv_method = m;
      ids.push_back((*sched)->submit(r).value());
    }
  run_to_end(**sched);
  for (size_t i = 0; i < methods.size(); ++i) {
    EngineParams p = e->params();
    p.kv_method = methods[i];
    auto alone = Engine::load(p);
    ASSERT_TRUE(alone.is_ok()) << alone.status().message();
    for (size_t j = 0; j < std::size(items); ++j) {
      const RequestStatus st = (*sched)->poll(ids[j * methods.size() + i]).value();
      EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
      EXPECT_EQ(st.text, session_text(**alone, item_prompt(*e, items[j]), g)) << methods[i] << ", item " << items[j];
    }
  }
  EXPECT_EQ(e->kv_bytes_in_use(), 0u);
}

// Qwen2-VL (the tiny fixture pair): image tokens at M-RoPE (t, h, w) positions and the text
// after them at positions advanced by the grid's extent, not its token count; two requests
// with the image at different offsets decode together and equal Session::generate.
TEST(SchedulerMedia, Qwen2VlMropeRequestsEqualSessionGenerate) {
  EngineParams p;
  p.model_path = std::string(VLKV_TEST_DATA) + "/fixtures/models/qwen2vl-tiny-text.gguf";
  p.mmproj_path = std::string(VLKV_TEST_DATA) + "/fixtures/models/mmproj-tiny-qwen2vl.gguf";
  p.kv_method = "f16";
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  auto e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  Result<Image> img = load_image(std::string(VLKV_TEST_DATA) + "/fixtures/images/test_image_64.png");
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  // Seeded sampling over the full distribution: its draws follow small logit changes (the
  // tiny random model's greedy text does not notice a wrong position).
  GenerateParams g = greedy(32, /*ignore_eos=*/true);
  g.sampling.temperature = 1.5f;
  g.sampling.top_k = 0;
  g.sampling.top_p = 1.0f;
  g.sampling.min_p = 0.0f;
  g.sampling.seed = 7;
  const Prompt prompts[] = {
      (*e)->user_prompt("Describe the image.", {MediaItem{{*img}, false}}, /*use_template=*/true),
      (*e)->user_prompt("A longer question first, then " + std::string(kMediaMarker) + " what is it?",
                        {MediaItem{{*img}, false}}, /*use_template=*/true)};
  auto sched = Scheduler::create(**e);
  ASSERT_TRUE(sched.is_ok());
  std::vector<RequestId> ids;
  for (const Prompt& pr : prompts) ids.push_back((*sched)->submit(prepared_request(**e, pr, g)).value());
  run_to_end(**sched);
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestStatus st = (*sched)->poll(ids[i]).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    EXPECT_EQ(st.text, session_text(**e, prompts[i], g)) << "request " << i;
  }
}

// Qwen2.5-VL (the second fixture batch's pair): a wide image (two ViT windows) and a video
// whose temporal positions follow time (1 fps: 4 positions per temporal patch) batched with
// the scheduler equal Session::generate, so both paths take the chunk's temporal step.
TEST(SchedulerMedia, Qwen25VlImageAndVideoRequestsEqualSessionGenerate) {
  EngineParams p;
  p.model_path = std::string(VLKV_TEST_DATA) + "/fixtures/models/qwen25vl-tiny-text.gguf";
  p.mmproj_path = std::string(VLKV_TEST_DATA) + "/fixtures/models/mmproj-tiny-qwen25vl.gguf";
  p.kv_method = "f16";
  p.kv_budget_bytes = 64ull << 20;
  p.n_threads = 2;
  auto e = Engine::load(p);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  Result<Image> img = load_image(std::string(VLKV_TEST_DATA) + "/fixtures/images/test_image_128x48.png");
  Result<Image> sq = load_image(std::string(VLKV_TEST_DATA) + "/fixtures/images/test_image_64.png");
  ASSERT_TRUE(img.is_ok() && sq.is_ok());
  GenerateParams g = greedy(24, /*ignore_eos=*/true);
  g.sampling.temperature = 1.5f;
  g.sampling.top_k = 0;
  g.sampling.top_p = 1.0f;
  g.sampling.min_p = 0.0f;
  g.sampling.seed = 11;
  const Prompt prompts[] = {
      (*e)->user_prompt("Describe the image.", {MediaItem{{*img}, false}}, /*use_template=*/false),
      (*e)->user_prompt("What happens in the clip?", {MediaItem{{*sq, *img, *sq, *img, *sq}, true, 1.0}}, false)};
  auto sched = Scheduler::create(**e);
  ASSERT_TRUE(sched.is_ok());
  std::vector<RequestId> ids;
  for (const Prompt& pr : prompts) ids.push_back((*sched)->submit(prepared_request(**e, pr, g)).value());
  run_to_end(**sched);
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestStatus st = (*sched)->poll(ids[i]).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    EXPECT_EQ(st.text, session_text(**e, prompts[i], g)) << "request " << i;
  }
  // The draws do follow the temporal step: at 4 fps (one position per patch) the text differs.
  const Prompt fps4 =
      (*e)->user_prompt("What happens in the clip?", {MediaItem{{*sq, *img, *sq, *img, *sq}, true, 4.0}}, false);
  EXPECT_NE(session_text(**e, fps4, g), session_text(**e, prompts[1], g));
}

TEST(SchedulerMedia, RejectsAMalformedPreparedPrompt) {
  auto e = load_vlm(64ull << 20);
  ASSERT_TRUE(e);
  auto sched = Scheduler::create(*e);
  ASSERT_TRUE(sched.is_ok());
  auto bad = std::make_shared<PreparedPrompt>();
  PromptChunk c;
  c.kind = PromptChunk::Kind::kMedia;
  c.n_tokens = 4;
  c.embeddings.resize(3);  // not [4, n_embd]
  bad->chunks.push_back(c);
  Request r;
  r.prepared = bad;
  r.generate = greedy(4, false);
  EXPECT_EQ((*sched)->submit(r).status().code(), StatusCode::kInvalidArgument);
  r.prepared = std::make_shared<PreparedPrompt>();
  EXPECT_EQ((*sched)->submit(r).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vlkv
