// The Scheduler's prefix cache (docs/prefix_cache.md): multi-turn conversations answer the
// same, byte for byte, with and without it, for every KV method (text on stories260K, an
// image on tinyvlm-shapes), with usage's cached tokens reported; two different images of
// the same size never hit each other's entries; a request cancelled mid-prompt frees its
// sequence but not the entries; a 3000-operation random test of the cache's bookkeeping
// against a model of it.
#include <gtest/gtest.h>

#include <list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/content_hash.h"
#include "engine/prefix_cache.h"
#include "kv/kv_cache.h"
#include "vlkv/engine.h"
#include "vlkv/scheduler.h"
#include "vlm_tinyvlm_util.h"

namespace vlkv {
namespace {

// Every registered method (their defaults; the list of vlkv run --help).
const std::vector<std::string> kMethods = {"f16",   "f32",   "int2",  "int3",       "int4",       "int8",  "kivi",
                                           "kivi2", "akvq_vl", "qcache_gla", "qcache_vla", "vidkv", "zipvl"};

std::unique_ptr<Engine> load_text(const std::string& method) {
  EngineParams p;
  p.model_path = std::string(VLKV_SOURCE_DIR) + "/models/stories260K.gguf";
  p.kv_method = method;
  p.kv_budget_bytes = 64ull << 20;
  p.kv_page_bytes = 4096;
  p.n_threads = 2;
  auto e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

std::unique_ptr<Engine> load_vlm(const std::string& method, uint64_t budget = 64ull << 20, int64_t n_ctx = 0) {
  EngineParams p;
  if (n_ctx > 0) p.n_ctx = n_ctx;
  p.model_path = tinyvlm::model_path();
  p.mmproj_path = tinyvlm::mmproj_path();
  p.kv_method = method;
  p.kv_budget_bytes = budget;
  p.kv_page_bytes = 4096;
  p.n_threads = 2;
  auto e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

GenerateParams greedy(int max_tokens) {
  GenerateParams g;
  g.max_tokens = max_tokens;
  g.ignore_eos = true;
  g.sampling.temperature = 0.0f;
  return g;
}

void run_to_end(Scheduler& s) {
  for (int i = 0; i < 100000 && !s.idle(); ++i) ASSERT_TRUE(s.step().is_ok());
  ASSERT_TRUE(s.idle());
}

struct TurnResult {
  std::string text;
  std::vector<int32_t> tokens;
  int64_t n_cached = 0;        // RequestStatus
  int64_t n_prompt = 0;
  int64_t n_cached_event = 0;  // the end event
  double stored = 0;           // exact codec bytes at the end
};

TurnResult run_one(Scheduler& s, const Request& r) {
  TurnResult out;
  auto id = s.submit(r, [&](const TokenEvent& ev) {
    if (ev.finished) {
      out.n_cached_event = ev.n_cached_tokens;
      out.stored = ev.kv_stored_bytes;
    }
    return true;
  });
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  if (!id.is_ok()) return out;
  run_to_end(s);
  const RequestStatus st = s.poll(*id).value();
  EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
  out.text = st.text;
  out.tokens = st.tokens;
  out.n_cached = st.n_cached_tokens;
  out.n_prompt = st.n_prompt_tokens;
  return out;
}

// A text conversation of token lists: turn t's prompt is turn t-1's prompt, its answer and
// a new user message. Passes of 16 tokens, so the text holds entry boundaries.
std::vector<TurnResult> text_conversation(Engine& e, uint64_t cache_budget, const std::string& method, int n_turns) {
  SchedulerParams sp;
  sp.max_step_prompt_tokens = 16;
  sp.cache_budget_bytes = cache_budget;
  auto s = Scheduler::create(e, sp);
  EXPECT_TRUE(s.is_ok());
  std::vector<TurnResult> out;
  std::vector<int32_t> prompt = {1};
  for (int t = 0; t < n_turns; ++t) {
    for (int j = 0; j < 23; ++j) prompt.push_back(5 + (t * 131 + j * 17) % 400);
    Request r;
    r.prompt_tokens = prompt;
    r.generate = greedy(12);
    r.kv_method = method;
    out.push_back(run_one(**s, r));
    prompt.insert(prompt.end(), out.back().tokens.begin(), out.back().tokens.end());
  }
  return out;
}

TEST(PrefixCache, TextConversationEqualsWithoutCacheForEveryMethod) {
  auto e = load_text("f16");
  ASSERT_TRUE(e);
  for (const std::string& m : kMethods) {
    const std::vector<TurnResult> want = text_conversation(*e, 0, m, 3);
    const std::vector<TurnResult> got = text_conversation(*e, 32ull << 20, m, 3);
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < got.size(); ++t) {
      EXPECT_EQ(got[t].text, want[t].text) << m << ", turn " << t + 1;
      EXPECT_EQ(got[t].stored, want[t].stored) << m << ", turn " << t + 1;  // the same bytes stored
      EXPECT_EQ(got[t].n_cached, got[t].n_cached_event);
      EXPECT_EQ(want[t].n_cached, 0);
      // Turn 1's last 16-token boundary before its end is turn 2's start, and so on.
      if (t > 0) {
        EXPECT_GT(got[t].n_cached, 0) << m << ", turn " << t + 1;
      }
      EXPECT_EQ(got[t].n_cached % 16, 0) << m;
    }
    EXPECT_EQ(got[0].n_cached, 0);
  }
  EXPECT_EQ(e->kv_bytes_in_use(), 0u);  // schedulers gone: their entries too
}

Image load_item_image(size_t i) {
  const nlohmann::json it = tinyvlm::reference_items().at(i);
  Result<Image> img = load_image(tinyvlm::data_dir() + "/" + it["image"].get<std::string>());
  EXPECT_TRUE(img.is_ok()) << img.status().message();
  return img.is_ok() ? std::move(*img) : Image{};
}

Request chat_request(const Engine& e, const std::vector<ChatTurn>& turns, const Image& img, const std::string& method,
                     int max_tokens) {
  Prompt p;
  p.text = e.apply_chat_template(turns);
  p.media.push_back(MediaItem{{img}, false});
  Result<PreparedPrompt> prepared = e.prepare_prompt(p, /*add_bos=*/true);
  EXPECT_TRUE(prepared.is_ok()) << prepared.status().message();
  Request r;
  if (prepared.is_ok()) r.prepared = std::make_shared<const PreparedPrompt>(std::move(prepared).value());
  r.generate = greedy(max_tokens);
  r.kv_method = method;
  return r;
}

// An OpenAI-style conversation about one image: every turn resends the image and the turns before.
// final_stats: the scheduler's stats after the last turn.
std::vector<TurnResult> image_conversation(Engine& e, uint64_t cache_budget, const std::string& method, int n_turns,
                                           SchedulerStats* final_stats = nullptr) {
  SchedulerParams sp;
  sp.cache_budget_bytes = cache_budget;
  auto s = Scheduler::create(e, sp);
  EXPECT_TRUE(s.is_ok());
  const Image img = load_item_image(0);
  const char* questions[] = {"What shape is in the picture?", "What colour is it?", "Is it large?"};
  std::vector<ChatTurn> turns;
  std::vector<TurnResult> out;
  for (int t = 0; t < n_turns; ++t) {
    turns.push_back({"user", (t == 0 ? std::string(kMediaMarker) : std::string()) + questions[t % 3]});
    out.push_back(run_one(**s, chat_request(e, turns, img, method, 10)));
    turns.push_back({"assistant", out.back().text});
  }
  if (final_stats) *final_stats = (*s)->stats();
  return out;
}

TEST(PrefixCache, ImageConversationEqualsWithoutCacheForEveryMethod) {
  auto e = load_vlm("f16");
  ASSERT_TRUE(e);
  for (const std::string& m : kMethods) {
    const std::vector<TurnResult> want = image_conversation(*e, 0, m, 3);
    SchedulerStats st;
    const std::vector<TurnResult> got = image_conversation(*e, 32ull << 20, m, 3, &st);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(st.prefix_cache.size(), 1u);
    EXPECT_EQ(st.prefix_cache[0].media_not_kept, m == "vidkv" ? 3 : 0) << m;
    if (m == "vidkv") {
      EXPECT_EQ(st.prefix_cache[0].inserted, 0);
    }
    for (size_t t = 0; t < got.size(); ++t) {
      EXPECT_EQ(got[t].text, want[t].text) << m << ", turn " << t + 1;
      EXPECT_EQ(got[t].stored, want[t].stored) << m << ", turn " << t + 1;
      EXPECT_EQ(got[t].n_cached, got[t].n_cached_event);
    }
    EXPECT_EQ(got[0].n_cached, 0) << m;
    // Turn t starts with turn t-1's whole prompt (prepare_prompt cuts the text after the
    // earlier assistant openings, so the passes end there). VidKV's visual rows depend on the
    // whole prompt's text (their similarity), which changes every turn: it keeps no entry.
    for (size_t t = 1; t < got.size(); ++t) EXPECT_EQ(got[t].n_cached, m == "vidkv" ? 0 : got[t - 1].n_prompt) << m;
  }
}

// The request as vlkv serve sends it with a prefix cache: media laid out unencoded, and a
// callback that encodes them (Request::encode).
Request unencoded_request(const Engine& e, const std::vector<ChatTurn>& turns, const Image& img, int max_tokens) {
  Prompt p;
  p.text = e.apply_chat_template(turns);
  p.media.push_back(MediaItem{{img}, false});
  Request r;
  r.generate = greedy(max_tokens);
  r.prepared = std::make_shared<const PreparedPrompt>(e.prepare_prompt_unencoded(p, true).value());
  r.encode = [&e, p]() -> Result<std::shared_ptr<const PreparedPrompt>> {
    VLKV_ASSIGN_OR_RETURN(PreparedPrompt enc, e.prepare_prompt(p, true));
    return std::make_shared<const PreparedPrompt>(std::move(enc));
  };
  return r;
}

// Two requests whose image stays unencoded (a cached entry covers it at submission) outgrow
// the pool: the entries are evicted, then the newer request is preempted and comes back
// with no entry to copy, so the stepping thread encodes its prompt (Request::encode's
// fallback) and replays it. Both answer as a run without the cache, byte for byte.
TEST(PrefixCache, PreemptedUnencodedRequestIsEncodedOnTheSteppingThread) {
  constexpr int kMaxTokens = 300;
  auto ref = load_vlm("f16");
  ASSERT_TRUE(ref);
  const Image img = load_item_image(2);
  const std::vector<ChatTurn> warm = {{"user", std::string(kMediaMarker) + "What shape is it?"}};
  const std::vector<ChatTurn> qb = {{"user", std::string(kMediaMarker) + "Where is the shape?"}};
  const std::vector<ChatTurn> qc = {{"user", std::string(kMediaMarker) + "What colour is the shape?"}};
  auto none = Scheduler::create(*ref);
  ASSERT_TRUE(none.is_ok());
  const TurnResult want_b = run_one(**none, chat_request(*ref, qb, img, "", kMaxTokens));
  const TurnResult want_c = run_one(**none, chat_request(*ref, qc, img, "", kMaxTokens));
  // The warm-up keeps one entry, the image's (its text has no assistant opening: no entry at
  // its end). Room for it and both prompts, not for both grown by kMaxTokens.
  auto warm_request = [&](const Engine& en) {
    Prompt wp;
    wp.text = en.apply_chat_template(warm, /*add_generation_prompt=*/false);
    wp.media.push_back(MediaItem{{img}, false});
    Request r;
    r.prepared = std::make_shared<const PreparedPrompt>(en.prepare_prompt(wp, true).value());
    r.generate = greedy(1);
    return r;
  };
  SchedulerParams sp;
  sp.cache_budget_bytes = 64ull << 20;
  auto probe = Scheduler::create(*ref, sp);
  ASSERT_TRUE(probe.is_ok());
  run_one(**probe, warm_request(*ref));
  ASSERT_EQ((*probe)->stats().prefix_cache[0].entries, 1);
  const uint64_t entries = (*probe)->stats().prefix_cache_bytes;
  ASSERT_GT(entries, 0u);
  const uint64_t budget = entries + (*probe)->kv_bytes_for(want_b.n_prompt + 1).value() +
                          (*probe)->kv_bytes_for(want_c.n_prompt + 1).value();
  probe->reset();

  EngineParams p = ref->params();
  p.kv_budget_bytes = budget;
  p.media_cache_bytes = 0;  // every encode counted is the encoder's run
  auto loaded = Engine::load(p);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  Engine& e = **loaded;
  sp.reserve_max_tokens = false;  // admitted by their prompts alone
  auto s = Scheduler::create(e, sp);
  ASSERT_TRUE(s.is_ok());
  run_one(**s, warm_request(e));
  const int64_t encodes_before = e.media_encodes();
  std::map<RequestId, const TurnResult*> want;
  for (const auto* q : {&qb, &qc}) {
    Result<RequestId> id = (*s)->submit(unencoded_request(e, *q, img, kMaxTokens));
    ASSERT_TRUE(id.is_ok()) << id.status().message();
    want[*id] = q == &qb ? &want_b : &want_c;
  }
  EXPECT_EQ(e.media_encodes(), encodes_before) << "the entry covers the image: nothing encoded at submission";
  run_to_end(**s);
  int64_t preempted = 0;
  for (const auto& [id, w] : want) {
    const RequestStatus st = (*s)->poll(id).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    EXPECT_EQ(st.tokens, w->tokens) << "request " << id << ", preempted " << st.n_preemptions;
    EXPECT_GT(st.n_cached_tokens, 0);  // its first admission copied the image's entry
    preempted += st.n_preemptions > 0;
  }
  {
    const SchedulerStats st = (*s)->stats();
    int64_t evicted = 0;
    for (const PrefixCacheMethodStats& m : st.prefix_cache) evicted += m.evicted;
    ASSERT_GT(preempted, 0) << "the budget did not force a preemption: steps " << st.n_steps << ", evicted " << evicted
                            << ", budget " << budget << ", entries " << entries << ", in use " << st.kv_bytes_in_use;
  }
  EXPECT_GE(e.media_encodes() - encodes_before, 1) << "the preempted request came back without being encoded";
  EXPECT_LE((*s)->stats().kv_bytes_in_use, budget);
}

// prepare_prompt cuts a conversation's text after each assistant opening but the last, and
// nowhere else: the tokens stay those of the text tokenized in one piece, turn N's chunks
// are the first chunks of turn N+1's, and only a prompt ending with the opening says so.
TEST(PrefixCache, ConversationTextIsCutAfterEachEarlierAssistantOpening) {
  auto e = load_vlm("f16");
  ASSERT_TRUE(e);
  const Image img = load_item_image(0);
  auto prepared = [&](const std::vector<ChatTurn>& turns, bool add_generation_prompt = true) {
    Prompt p;
    p.text = e->apply_chat_template(turns, add_generation_prompt);
    p.media.push_back(MediaItem{{img}, false});
    return e->prepare_prompt_unencoded(p, true).value();
  };
  auto text_chunks = [](const PreparedPrompt& p) {
    std::vector<std::vector<int32_t>> out;
    for (const PromptChunk& c : p.chunks)
      if (c.kind == PromptChunk::Kind::kText && c.n_tokens > 0) out.push_back(c.tokens);
    return out;
  };
  std::vector<ChatTurn> turns = {{"user", std::string(kMediaMarker) + "What shape is it?"}};
  const PreparedPrompt t1 = prepared(turns);
  EXPECT_TRUE(t1.ends_at_turn);
  EXPECT_FALSE(prepared(turns, false).ends_at_turn);
  const size_t n1 = text_chunks(t1).size();
  turns.push_back({"assistant", "A red circle."});
  turns.push_back({"user", "Is it large?"});
  const PreparedPrompt t2 = prepared(turns);
  turns.push_back({"assistant", "No, it is small."});
  turns.push_back({"user", "What colour is the background?"});
  const PreparedPrompt t3 = prepared(turns);
  const auto c1 = text_chunks(t1), c2 = text_chunks(t2), c3 = text_chunks(t3);
  ASSERT_EQ(c2.size(), n1 + 1);  // one cut: after turn 1's opening
  ASSERT_EQ(c3.size(), n1 + 2);
  for (size_t i = 0; i < n1; ++i) EXPECT_EQ(c2[i], c1[i]) << i;
  for (size_t i = 0; i < n1 + 1; ++i) EXPECT_EQ(c3[i], c2[i]) << i;
  // The text after the image, tokenized in one piece, is the cut chunks joined.
  const std::string text = e->apply_chat_template(turns);
  const std::vector<int32_t> whole = e->tokenize(text.substr(text.find(kMediaMarker) + std::string(kMediaMarker).size()),
                                                 false, true);
  std::vector<int32_t> joined;
  for (size_t i = n1 - 1; i < c3.size(); ++i) joined.insert(joined.end(), c3[i].begin(), c3[i].end());
  EXPECT_EQ(joined, whole);
}

// Ten turns about one image: every turn from the 2nd on reuses the whole previous prompt and
// prefills only the previous answer and the new question; the turn it continued is replaced
// by its own longer entry, so the cache holds the image's entry and the last turn's.
TEST(PrefixCache, TenTurnConversationReusesEachPreviousPrompt) {
  auto e = load_vlm("f16", 64ull << 20, 1024);  // past tinyvlm's 512: equal answers is what counts
  ASSERT_TRUE(e);
  for (const std::string& m : {std::string("f16"), std::string("kivi2"), std::string("akvq_vl")}) {
    const std::vector<TurnResult> want = image_conversation(*e, 0, m, 10);
    SchedulerStats st;
    const std::vector<TurnResult> got = image_conversation(*e, 32ull << 20, m, 10, &st);
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < got.size(); ++t) {
      EXPECT_EQ(got[t].text, want[t].text) << m << ", turn " << t + 1;
      EXPECT_EQ(got[t].stored, want[t].stored) << m << ", turn " << t + 1;
      EXPECT_EQ(got[t].n_cached, t == 0 ? 0 : got[t - 1].n_prompt) << m << ", turn " << t + 1;
    }
    ASSERT_EQ(st.prefix_cache.size(), 1u);
    const PrefixCacheMethodStats& c = st.prefix_cache[0];
    EXPECT_EQ(c.hits, 9) << m;
    EXPECT_EQ(c.replaced, 9) << m;  // turns 1..9's prompt entries, each replaced by the next turn's
    EXPECT_EQ(c.entries, 2) << m;   // the image's and turn 10's
    EXPECT_GT(c.tokens, got[9].n_prompt) << m;
    EXPECT_LT(c.tokens, got[9].n_prompt + got[0].n_prompt) << m;
  }
}

TEST(PrefixCache, DifferentImagesOfTheSameSizeNeverHit) {
  auto e = load_vlm("f16");
  ASSERT_TRUE(e);
  const Image a = load_item_image(0);
  Image b = a;  // the same size, other pixels
  for (size_t i = 0; i < b.pixels.size(); i += 3) b.pixels[i] = static_cast<uint8_t>(255 - b.pixels[i]);
  ASSERT_NE(a.pixels, b.pixels);
  const std::vector<ChatTurn> turn = {{"user", std::string(kMediaMarker) + "What shape is in the picture?"}};
  SchedulerParams sp;
  sp.cache_budget_bytes = 32ull << 20;
  auto s = Scheduler::create(*e, sp);
  ASSERT_TRUE(s.is_ok());
  auto none = Scheduler::create(*e);
  ASSERT_TRUE(none.is_ok());
  const TurnResult first = run_one(**s, chat_request(*e, turn, a, "", 10));
  EXPECT_EQ(first.n_cached, 0);
  ASSERT_GT((*s)->stats().prefix_cache_bytes, 0u);
  const TurnResult other = run_one(**s, chat_request(*e, turn, b, "", 10));
  EXPECT_EQ(other.n_cached, 0);  // same token ids and size, other pixels: a miss
  EXPECT_EQ(other.text, run_one(**none, chat_request(*e, turn, b, "", 10)).text);
  const TurnResult again = run_one(**s, chat_request(*e, turn, a, "", 10));
  EXPECT_GT(again.n_cached, 0);  // the first image again: a hit
  EXPECT_EQ(again.text, first.text);
  // Another method never reads these entries.
  const TurnResult kivi = run_one(**s, chat_request(*e, turn, a, "kivi2", 10));
  EXPECT_EQ(kivi.n_cached, 0);
  const SchedulerStats st = (*s)->stats();
  int64_t hits = 0, misses = 0;
  for (const PrefixCacheMethodStats& m : st.prefix_cache) {
    hits += m.hits;
    misses += m.misses;
  }
  EXPECT_EQ(hits, 1);
  EXPECT_EQ(misses, 3);
  EXPECT_GE(st.media_cache_hits, 3);  // a and b encoded once each
}

TEST(PrefixCache, CancelledRequestFreesItsSequenceNotTheEntries) {
  auto e = load_vlm("f16");
  ASSERT_TRUE(e);
  SchedulerParams sp;
  sp.cache_budget_bytes = 32ull << 20;
  sp.max_step_prompt_tokens = 32;  // the text after the image takes several steps
  auto s = Scheduler::create(*e, sp);
  ASSERT_TRUE(s.is_ok());
  const Image img = load_item_image(1);
  std::string long_question = "Describe";
  for (int i = 0; i < 30; ++i) long_question += " the picture";
  Request r = chat_request(*e, {{"user", std::string(kMediaMarker) + long_question}}, img, "", 50);
  const RequestId id = (*s)->submit(r).value();
  // Step until the entry at the end of the image is kept, the request still prefilling.
  for (int i = 0; i < 1000 && (*s)->stats().prefix_cache_bytes == 0; ++i) ASSERT_TRUE((*s)->step().is_ok());
  const SchedulerStats mid = (*s)->stats();
  ASSERT_GT(mid.prefix_cache_bytes, 0u);
  ASSERT_EQ((*s)->poll(id)->state, RequestState::kRunning);
  ASSERT_GT(mid.kv_bytes_in_use, mid.prefix_cache_bytes);  // the request's own sequence too
  ASSERT_TRUE((*s)->cancel(id).is_ok());  // the client hung up
  run_to_end(**s);
  const SchedulerStats after = (*s)->stats();
  EXPECT_EQ((*s)->poll(id)->reason, FinishReason::kCancelled);
  EXPECT_EQ(after.prefix_cache_bytes, mid.prefix_cache_bytes);
  EXPECT_EQ(after.kv_bytes_in_use, after.prefix_cache_bytes);  // only the entries are held
  // The entry serves the next request.
  const TurnResult next = run_one(**s, chat_request(*e, {{"user", std::string(kMediaMarker) + "What is it?"}}, img, "", 5));
  EXPECT_GT(next.n_cached, 0);
}

// Idle entries give way to running requests: small requests fill the pool with entries,
// then a request whose reservation needs most of the budget runs (entries evicted at its
// admission, or, with reserve_max_tokens false, when the pool runs dry while it decodes)
// and answers as without the cache.
TEST(PrefixCache, EntriesAreEvictedBeforeRequestsWait) {
  for (bool reserve : {true, false}) {
    auto e = load_vlm("f16");
    ASSERT_TRUE(e);
    const auto question = [](size_t) {
      return std::vector<ChatTurn>{{"user", std::string(kMediaMarker) + "What shape is it?"}};
    };
    Request big = chat_request(*e, question(5), load_item_image(5), "", 200);
    auto probe = Scheduler::create(*e);
    ASSERT_TRUE(probe.is_ok());
    const uint64_t need = (*probe)->kv_bytes_for(big.prepared->n_tokens() + 200).value();
    probe->reset();
    EngineParams p = e->params();
    p.kv_budget_bytes = need + need / 8;
    e.reset();
    auto e2 = Engine::load(p);
    ASSERT_TRUE(e2.is_ok());
    SchedulerParams sp;
    sp.cache_budget_bytes = p.kv_budget_bytes;
    sp.reserve_max_tokens = reserve;
    sp.max_step_prompt_tokens = 16;  // two entries a request
    auto s = Scheduler::create(**e2, sp);
    ASSERT_TRUE(s.is_ok());
    sp.cache_budget_bytes = 0;
    auto none = Scheduler::create(**e2, sp);
    ASSERT_TRUE(none.is_ok());
    for (size_t item : {2, 3, 4}) {
      Request q = chat_request(**e2, question(item), load_item_image(item), "", 4);
      EXPECT_EQ(run_one(**s, q).text, run_one(**none, q).text) << item;
    }
    const SchedulerStats filled = (*s)->stats();
    EXPECT_GT(filled.prefix_cache_bytes, need / 8) << "reserve " << reserve;  // more than the room left for them
    big = chat_request(**e2, question(5), load_item_image(5), "", 200);
    const TurnResult got = run_one(**s, big);
    EXPECT_EQ(got.text, run_one(**none, big).text);
    const SchedulerStats st = (*s)->stats();
    int64_t evicted = 0;
    for (const PrefixCacheMethodStats& m : st.prefix_cache) evicted += m.evicted;
    EXPECT_GT(evicted, 0) << "reserve " << reserve;
    EXPECT_EQ(st.n_preemptions, 0) << "reserve " << reserve;
    EXPECT_LE(st.kv_bytes_in_use, p.kv_budget_bytes);
  }
}

// FIPS 180-4's examples: one block, two blocks, and a million 'a's fed in odd pieces.
TEST(PrefixCache, Sha256MatchesTheStandardsVectors) {
  auto hex = [](const std::array<uint8_t, 32>& d) {
    std::string s;
    char buf[3];
    for (uint8_t b : d) {
      std::snprintf(buf, sizeof buf, "%02x", b);
      s += buf;
    }
    return s;
  };
  Sha256 a;
  a.update("abc", 3);
  EXPECT_EQ(hex(a.finish()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 b;
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  b.update(two.data(), two.size());
  EXPECT_EQ(hex(b.finish()), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 c;
  const std::string piece(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, piece.size());
    c.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(hex(c.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// ---- the cache's bookkeeping alone, on a small KvCache ----

struct ModelEntry {
  std::string method;
  std::vector<RowKey> rows;
  uint64_t bytes = 0;
};

// An owner cap (vlkv serve --cache-tenant-share): one owner filling the cache evicts its
// own entries, not another owner's; without the cap it evicts the other's too.
TEST(PrefixCache, OwnerCapKeepsOneOwnerFromEvictingAnothers) {
  for (const bool capped : {true, false}) {
    KvCacheConfig cfg;
    cfg.geometry = {2, 2, 1, 32, 0};
    cfg.method = "f16";
    cfg.budget_bytes = 64ull << 20;
    cfg.page_bytes = 1024;
    auto kv = KvCache::create(cfg);
    ASSERT_TRUE(kv.is_ok());
    KvCache& cache_kv = **kv;
    std::vector<float> k(32, 0.5f);
    std::vector<TokenKind> kinds(16, TokenKind::kText);
    auto sequence = [&](int64_t n) {
      const SeqId s = cache_kv.add_sequence("f16").value();
      for (int64_t t = 0; t < n; ++t) {
        for (int l = 0; l < 2; ++l) EXPECT_TRUE(cache_kv.store_without_attention(s, l, k.data(), k.data(), kinds.data(), 1).is_ok());
        cache_kv.commit(s, 1);
      }
      return s;
    };
    const SeqId probe = sequence(16);
    const uint64_t entry = cache_kv.sequence_bytes(probe);
    PrefixCache cache(cache_kv, 8 * entry);
    if (capped) cache.set_owner_cap(4 * entry);
    auto rows = [](uint64_t tag) { return std::vector<RowKey>(16, RowKey{tag, tag}); };
    ASSERT_TRUE(cache.insert(probe, "f16", 8, rows(1), cfg.budget_bytes, -1, /*owner=*/1));
    for (uint64_t i = 0; i < 20; ++i) {
      const SeqId s = sequence(16);
      cache.insert(s, "f16", 8, rows(100 + i), cfg.budget_bytes, -1, /*owner=*/2);
      cache_kv.remove_sequence(s);
    }
    const auto all = [](int64_t) { return true; };
    EXPECT_EQ(cache.find("f16", 8, rows(1), 16, all).id >= 0, capped) << (capped ? "capped" : "uncapped");
    if (capped) {
      EXPECT_LE(cache.owner_bytes(2), 4 * entry);
    }
    EXPECT_TRUE(cache.check_invariants().is_ok()) << cache.check_invariants().message();
    cache_kv.remove_sequence(probe);
  }
}

TEST(PrefixCache, RandomOperationsKeepTheBookkeepingExact) {
  KvCacheConfig cfg;
  cfg.geometry = {2, 2, 1, 32, 0};
  cfg.method = "f16";
  cfg.budget_bytes = 64ull << 20;
  cfg.page_bytes = 1024;
  auto kv = KvCache::create(cfg);
  ASSERT_TRUE(kv.is_ok());
  KvCache& cache_kv = **kv;
  const uint64_t cap = 96 * 1024;
  PrefixCache cache(cache_kv, cap);
  std::mt19937 rng(22);
  std::vector<std::string> methods;  // canonical specs, as the Scheduler passes them
  for (const char* spec : {"f16", "kivi2"}) {
    const SeqId seq = cache_kv.add_sequence(spec).value();
    methods.push_back(cache_kv.sequence_method(seq));
    cache_kv.remove_sequence(seq);
  }
  // Conversations: rows drawn from a few bases so prefixes overlap.
  std::vector<std::vector<RowKey>> bases(4);
  for (auto& b : bases)
    for (int i = 0; i < 96; ++i) b.push_back(RowKey{rng() % 3, rng() % 5});
  auto rows_of = [&](size_t base, int64_t n) {
    return std::vector<RowKey>(bases[base].begin(), bases[base].begin() + n);
  };
  std::list<ModelEntry> model;  // most recent first
  auto model_find = [&](const std::string& m, const std::vector<RowKey>& q, int64_t max_n) {
    auto best = model.end();
    for (auto it = model.begin(); it != model.end(); ++it) {
      const int64_t n = static_cast<int64_t>(it->rows.size());
      if (it->method != m || n > max_n || n % 3 == 0) continue;
      if (!std::equal(it->rows.begin(), it->rows.end(), q.begin())) continue;
      if (best == model.end() || n > static_cast<int64_t>(best->rows.size())) best = it;
    }
    return best;
  };
  std::vector<float> k(32), v(32);
  std::vector<TokenKind> kinds(96, TokenKind::kText);
  int n_hits = 0, n_inserts = 0, n_evictions = 0, n_replaced = 0;
  for (int op = 0; op < 3000; ++op) {
    const std::string& m = methods[rng() % methods.size()];
    const size_t base = rng() % bases.size();
    const int choice = static_cast<int>(rng() % 10);
    if (choice < 5) {  // insert
      const int64_t n = 1 + static_cast<int64_t>(rng() % 95);
      auto src = cache_kv.add_sequence(m);
      ASSERT_TRUE(src.is_ok());
      for (float& x : k) x = static_cast<float>(rng() % 1000) / 500.0f - 1.0f;
      for (int64_t t = 0; t < n; ++t) {
        for (int l = 0; l < 2; ++l)
          ASSERT_TRUE(cache_kv.store_without_attention(*src, l, k.data(), k.data(), kinds.data(), 1).is_ok());
        cache_kv.commit(*src, 1);
      }
      const std::vector<RowKey> rows = rows_of(base, n);
      const uint64_t need = cache_kv.sequence_bytes(*src);
      const uint64_t room = rng() % 4 == 0 ? need * (rng() % 3) : cfg.budget_bytes;
      // A third of the inserts replace the entry they continue (the Scheduler's next turn):
      // the longest shorter prefix, looked up (and so touched) first.
      int64_t replaces = -1;
      auto prev = model.end();
      if (rng() % 3 == 0 && n > 1) {
        const PrefixCache::Hit hit = cache.find(m, 8, rows, n - 1, [](int64_t x) { return x % 3 != 0; });
        prev = model_find(m, rows, n - 1);
        ASSERT_EQ(hit.id >= 0, prev != model.end()) << "op " << op;
        if (prev != model.end()) {
          model.splice(model.begin(), model, prev);
          replaces = hit.id;
        }
      }
      // The model: an existing entry is touched; else the replaced entry goes, then LRU
      // entries until it fits.
      bool want = false;
      auto same = std::find_if(model.begin(), model.end(), [&](const ModelEntry& x) { return x.method == m && x.rows == rows; });
      if (same != model.end()) {
        model.splice(model.begin(), model, same);
      } else {
        if (prev != model.end()) {
          model.erase(prev);
          ++n_replaced;
        }
        const uint64_t limit = std::min(cap, room);
        if (need <= limit) {
          uint64_t held = 0;
          for (const ModelEntry& x : model) held += x.bytes;
          while (held + need > limit && !model.empty()) {
            held -= model.back().bytes;
            model.pop_back();
            ++n_evictions;
          }
          if (held + need <= limit) {
            model.push_front({m, rows, need});
            want = true;
          }
        }
      }
      EXPECT_EQ(cache.insert(*src, m, 8, rows, room, replaces), want) << "op " << op;
      n_inserts += want;
      cache_kv.remove_sequence(*src);
    } else if (choice < 9) {  // lookup: the longest entry that is a prefix, at an accepted boundary
      const int64_t max_n = 1 + static_cast<int64_t>(rng() % 96);
      const std::vector<RowKey> q = rows_of(base, 96);
      const PrefixCache::Hit hit = cache.find(m, 8, q, max_n, [](int64_t n) { return n % 3 != 0; });
      auto best = model_find(m, q, max_n);
      if (best == model.end()) {
        EXPECT_EQ(hit.id, -1) << "op " << op;
      } else {
        ASSERT_GE(hit.id, 0) << "op " << op;
        EXPECT_EQ(hit.n_tokens, static_cast<int64_t>(best->rows.size()));
        EXPECT_EQ(cache_kv.n_tokens(hit.seq), hit.n_tokens);
        EXPECT_EQ(cache_kv.sequence_method(hit.seq), m);
        model.splice(model.begin(), model, best);
        ++n_hits;
      }
      // Another chunk size never matches.
      EXPECT_EQ(cache.find(m, 16, q, max_n, [](int64_t) { return true; }).id, -1);
    } else {  // evict the least recently used
      EXPECT_EQ(cache.evict_lru(), !model.empty());
      if (!model.empty()) model.pop_back();
    }
    ASSERT_TRUE(cache.check_invariants().is_ok()) << cache.check_invariants().message() << " after op " << op;
    ASSERT_EQ(cache.n_entries(), static_cast<int64_t>(model.size())) << "op " << op;
    uint64_t held = 0;
    for (const ModelEntry& x : model) held += x.bytes;
    ASSERT_EQ(cache.bytes(), held);
    ASSERT_LE(cache.bytes(), cap);
    ASSERT_EQ(cache_kv.bytes_in_use(), cache.bytes());  // nothing but the entries is held
  }
  // Every operation kind happened many times.
  EXPECT_GT(n_hits, 100);
  EXPECT_GT(n_inserts, 100);
  EXPECT_GT(n_evictions, 50);
  EXPECT_GT(n_replaced, 50);
}

}  // namespace
}  // namespace vlkv
