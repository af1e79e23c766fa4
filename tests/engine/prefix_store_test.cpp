// The Scheduler's prefix stores (include/vlkv/prefix_store.h; vlkv serve --cache-dir and
// --redis): entries written by one scheduler are found by another whose own cache is empty
// (a replica, a restarted server), with the same answers and stored KV bytes as a run without
// any cache, for every KV method; a stored value that is corrupt, truncated, of another key,
// method or model is refused (counted) and the prompt recomputed with the right answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/prefix_store.h"
#include "vlkv/scheduler.h"
#include "vlm_tinyvlm_util.h"

namespace vlkv {
namespace {

const std::vector<std::string> kMethods = {"f16",   "f32",   "int2",  "int3",       "int4",       "int8",  "kivi",
                                           "kivi2", "akvq_vl", "qcache_gla", "qcache_vla", "vidkv", "zipvl"};

// A store in memory; `answer` (when set) replaces what get() returns.
class MemoryStore : public PrefixStore {
 public:
  std::function<std::optional<std::string>(const std::string& key)> answer;
  std::optional<std::string> get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (answer) return answer(key);
    auto it = values.find(key);
    if (it == values.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    ++stats_.hits;
    return it->second;
  }
  bool wants(const std::string& key, uint64_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return !values.count(key);
  }
  void put(const std::string& key, std::string value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.writes;
    values[key] = std::move(value);
  }
  void refused(const std::string&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.refused;
  }
  PrefixStoreStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  std::map<std::string, std::string> values;

 private:
  mutable std::mutex mutex_;
  PrefixStoreStats stats_;
};

std::unique_ptr<Engine> load(const std::string& model, const std::string& mmproj = "") {
  EngineParams p;
  p.model_path = model;
  p.mmproj_path = mmproj;
  p.kv_budget_bytes = 64ull << 20;
  p.kv_page_bytes = 4096;
  p.n_threads = 2;
  auto e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

std::string stories() { return std::string(VLKV_SOURCE_DIR) + "/models/stories260K.gguf"; }

struct Turn {
  std::vector<int32_t> tokens;
  int64_t n_cached = 0;
  double stored = 0;
};

// A new scheduler (its local cache empty) sharing `store` (null: no cache); null on failure.
std::unique_ptr<Scheduler> fresh_scheduler(Engine& e, SchedulerParams sp, std::shared_ptr<PrefixStore> store) {
  sp.cache_budget_bytes = store ? 32ull << 20 : 0;
  sp.shared_store = store;
  auto s = Scheduler::create(e, sp);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(*s) : nullptr;
}

// Runs `r` (10 greedy tokens, EOS ignored) with `method` to its end on `s`.
Turn run_to_end(Scheduler& s, Request r, const std::string& method) {
  r.generate.max_tokens = 10;
  r.generate.ignore_eos = true;
  r.generate.sampling.temperature = 0.0f;
  r.kv_method = method;
  Turn out;
  auto id = s.submit(r, [&](const TokenEvent& ev) {
    if (ev.finished) out.stored = ev.kv_stored_bytes;
    return true;
  });
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  if (!id.is_ok()) return out;
  for (int i = 0; i < 100000 && !s.idle(); ++i) EXPECT_TRUE(s.step().is_ok());
  const RequestStatus st = s.poll(*id).value();
  EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
  out.tokens = st.tokens;
  out.n_cached = st.n_cached_tokens;
  return out;
}

// One request on a new scheduler (its local cache empty), sharing `store` (null: no cache).
Turn run_fresh(Engine& e, const std::vector<int32_t>& prompt, const std::string& method, std::shared_ptr<PrefixStore> store) {
  SchedulerParams sp;
  sp.max_step_prompt_tokens = 16;  // entry boundaries every 16 prompt tokens
  auto s = fresh_scheduler(e, std::move(sp), store);
  if (!s) return {};
  Request r;
  r.prompt_tokens = prompt;
  return run_to_end(*s, std::move(r), method);
}

// Turn t's prompt: turn t-1's, its answer and 23 new tokens.
std::vector<int32_t> next_prompt(std::vector<int32_t> prompt, const std::vector<int32_t>& answer, int t) {
  prompt.insert(prompt.end(), answer.begin(), answer.end());
  for (int j = 0; j < 23; ++j) prompt.push_back(5 + (t * 131 + j * 17) % 400);
  return prompt;
}

TEST(PrefixStore, EntriesCarryOverToAnotherSchedulerForEveryMethod) {
  auto e = load(stories());
  ASSERT_TRUE(e);
  for (const std::string& m : kMethods) {
    SCOPED_TRACE(m);
    auto store = std::make_shared<MemoryStore>();
    std::vector<int32_t> prompt = next_prompt({1}, {}, 0);
    for (int t = 0; t < 3; ++t) {
      const Turn want = run_fresh(*e, prompt, m, nullptr), got = run_fresh(*e, prompt, m, store);
      EXPECT_EQ(got.tokens, want.tokens) << "turn " << t + 1;
      EXPECT_EQ(got.stored, want.stored) << "turn " << t + 1;  // the same bytes stored
      if (t > 0) {
        EXPECT_GT(got.n_cached, 0) << "turn " << t + 1;  // from the store alone
      }
      prompt = next_prompt(prompt, want.tokens, t + 1);
    }
    EXPECT_GE(store->stats().hits, 2);
    EXPECT_EQ(store->stats().refused, 0);
  }
  EXPECT_EQ(e->kv_bytes_in_use(), 0u);
}

TEST(PrefixStore, BadValuesAreRefusedAndRecomputed) {
  auto e = load(stories());
  auto vlm = load(tinyvlm::model_path(), tinyvlm::mmproj_path());
  ASSERT_TRUE(e && vlm);
  const std::vector<int32_t> turn1 = next_prompt({1}, {}, 0);
  // Good entries of turn 1, f16 and kivi2, and one of the other model.
  auto good = std::make_shared<MemoryStore>(), good_kivi = std::make_shared<MemoryStore>(),
       other_model = std::make_shared<MemoryStore>();
  const Turn t1 = run_fresh(*e, turn1, "f16", good);
  run_fresh(*e, turn1, "kivi2", good_kivi);
  run_fresh(*vlm, turn1, "f16", other_model);
  ASSERT_FALSE(good->values.empty());
  ASSERT_FALSE(other_model->values.empty());
  const std::vector<int32_t> turn2 = next_prompt(turn1, t1.tokens, 1);
  const Turn want = run_fresh(*e, turn2, "f16", nullptr);
  const std::string entry = good->values.rbegin()->second;
  const std::string kivi_entry = good_kivi->values.rbegin()->second;
  const std::string vlm_entry = other_model->values.rbegin()->second;

  struct Case {
    const char* what;
    std::function<std::string()> value;
  };
  std::vector<Case> cases = {
      {"another key's entry (turn 1's, for turn 2's longest prefix)", [&] { return entry; }},
      {"another method's entry", [&] { return kivi_entry; }},
      {"another model's entry", [&] { return vlm_entry; }},
      {"empty", [] { return std::string(); }},
      {"not a KV file", [] { return std::string(4096, 'x'); }},
  };
  for (size_t cut : {size_t{1}, size_t{31}, size_t{100}, entry.size() / 2, entry.size() - 1})
    cases.push_back({"truncated", [&entry, cut] { return entry.substr(0, cut); }});
  std::vector<size_t> flips;  // the header, table and small sections densely, the KV section sparsely
  for (size_t at = 0; at < std::min<size_t>(entry.size(), 640); at += 29) flips.push_back(at);
  for (size_t at = 640; at < entry.size(); at += entry.size() / 11 + 1) flips.push_back(at);
  for (size_t at : flips)
    cases.push_back({"one byte flipped", [&entry, at] {
                       std::string v = entry;
                       v[at] ^= 0x10;
                       return v;
                     }});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto hostile = std::make_shared<MemoryStore>();
    // Every key answered with this value: the entries of other keys too (their rows differ).
    hostile->answer = [&](const std::string&) { return std::optional<std::string>(c.value()); };
    const Turn got = run_fresh(*e, turn2, "f16", hostile);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.stored, want.stored);
    EXPECT_EQ(got.n_cached, 0);
    EXPECT_EQ(hostile->stats().refused, 1);
  }
  EXPECT_EQ(e->kv_bytes_in_use(), 0u);
}

// An image conversation on tinyvlm whose requests carry their media unencoded
// (Engine::prepare_prompt_unencoded + Request::encode, as vlkv serve sends them with a
// prefix cache): a turn whose entry comes from a store runs no vision encoder, and answers and
// stores what a run without any cache does; a value refused at admission falls back to
// encoding on the stepping thread, with the same answer.
struct ImageTurn {
  Turn result;
  int64_t encodes = 0;  // vision encoder runs during the turn
};

ImageTurn run_image_turn(Engine& e, const Prompt& prompt, const std::string& method, std::shared_ptr<PrefixStore> store,
                         bool unencoded) {
  auto s = fresh_scheduler(e, SchedulerParams{}, store);
  if (!s) return {};
  Request r;
  auto shared = std::make_shared<const Prompt>(prompt);
  const int64_t encodes_before = e.media_encodes();  // the prompt's preparation included
  Result<PreparedPrompt> prepared = unencoded ? e.prepare_prompt_unencoded(prompt, true) : e.prepare_prompt(prompt, true);
  EXPECT_TRUE(prepared.is_ok()) << prepared.status().message();
  if (!prepared.is_ok()) return {};
  r.prepared = std::make_shared<const PreparedPrompt>(std::move(prepared).value());
  if (unencoded) {
    r.encode = [&e, shared]() -> Result<std::shared_ptr<const PreparedPrompt>> {
      VLKV_ASSIGN_OR_RETURN(PreparedPrompt p, e.prepare_prompt(*shared, true));
      return std::make_shared<const PreparedPrompt>(std::move(p));
    };
  }
  ImageTurn out;
  out.result = run_to_end(*s, std::move(r), method);
  out.encodes = e.media_encodes() - encodes_before;
  EXPECT_EQ(s->stats().media_encodes, e.media_encodes());
  return out;
}

TEST(PrefixStore, AnImageEntryFromAStoreSkipsTheEncoder) {
  EngineParams p;
  p.model_path = tinyvlm::model_path();
  p.mmproj_path = tinyvlm::mmproj_path();
  p.kv_budget_bytes = 64ull << 20;
  p.kv_page_bytes = 4096;
  p.n_threads = 2;
  p.media_cache_bytes = 0;  // no encoder cache: every encode counted is the encoder's run
  auto loaded = Engine::load(p);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  Engine& e = **loaded;
  Result<Image> img = load_image(tinyvlm::data_dir() + "/" + tinyvlm::reference_items().at(0)["image"].get<std::string>());
  ASSERT_TRUE(img.is_ok()) << img.status().message();
  auto prompt_of = [&](const std::vector<ChatTurn>& turns) {
    Prompt pr;
    pr.text = e.apply_chat_template(turns);
    pr.media.push_back(MediaItem{{*img}, false});
    return pr;
  };
  std::vector<ChatTurn> turns = {{"user", std::string(kMediaMarker) + "What shape is in the picture?"}};
  const Prompt turn1 = prompt_of(turns);

  // Without a cache or an encode callback, unencoded media are refused, not fed.
  {
    auto s = Scheduler::create(e);
    ASSERT_TRUE(s.is_ok());
    Request r;
    r.prepared = std::make_shared<const PreparedPrompt>(e.prepare_prompt_unencoded(turn1, true).value());
    EXPECT_EQ((*s)->submit(r).status().code(), StatusCode::kInvalidArgument);
  }
  for (const std::string& m : {std::string("f16"), std::string("kivi2"), std::string("vidkv")}) {
    SCOPED_TRACE(m);
    auto store = std::make_shared<MemoryStore>();
    // Turn 1 on replica A: nothing cached, so its image is encoded once; its entries go to the store.
    const ImageTurn a1 = run_image_turn(e, turn1, m, store, true), plain1 = run_image_turn(e, turn1, m, nullptr, false);
    EXPECT_EQ(a1.result.tokens, plain1.result.tokens);
    EXPECT_EQ(a1.encodes, 1);
    if (m == "vidkv") {  // its media rows depend on all of the prompt's text: no entry kept, none stored
      EXPECT_TRUE(store->values.empty());
      continue;
    }
    ASSERT_FALSE(store->values.empty());
    std::vector<ChatTurn> next = turns;
    next.push_back({"assistant", ""});
    for (int32_t t : plain1.result.tokens) next.back().content += e.token_to_piece(t);
    next.push_back({"user", "What colour is it?"});
    const Prompt turn2 = prompt_of(next);
    // Turn 2 on replica B (its own cache empty): the entry from the store covers the image.
    const ImageTurn plain2 = run_image_turn(e, turn2, m, nullptr, false);
    const ImageTurn b2 = run_image_turn(e, turn2, m, store, true);
    EXPECT_EQ(b2.result.tokens, plain2.result.tokens);
    EXPECT_EQ(b2.result.stored, plain2.result.stored);
    EXPECT_GT(b2.result.n_cached, 0);
    EXPECT_EQ(b2.encodes, 0) << "the vision encoder ran on a prefix hit that covers the image";
    EXPECT_EQ(plain2.encodes, 1);

    // A store whose value is found at submission (so the image stays unencoded) but refused
    // at admission (a byte flipped in the middle): encoded on the stepping thread instead.
    auto broken = std::make_shared<MemoryStore>();
    broken->answer = [&](const std::string& key) -> std::optional<std::string> {
      auto it = store->values.find(key);
      if (it == store->values.end()) return std::nullopt;
      std::string v = it->second;
      v[v.size() / 2] ^= 0x10;
      return v;
    };
    const ImageTurn c2 = run_image_turn(e, turn2, m, broken, true);
    EXPECT_EQ(c2.result.tokens, plain2.result.tokens);
    EXPECT_EQ(c2.result.stored, plain2.result.stored);
    EXPECT_EQ(c2.result.n_cached, 0);
    EXPECT_EQ(c2.encodes, 1);
    EXPECT_EQ(broken->stats().refused, 1);
  }
  EXPECT_EQ(e.kv_bytes_in_use(), 0u);
}

}  // namespace

}  // namespace vlkv
