// TextDecoder::forward_batch: a sequence's logits in a batched step equal its solo
// forward() logits, for every registered KV method, prompts of different lengths
// (chunked), and sequences joining and leaving mid-run.
// Tolerance: 0 (bit for bit). A sequence's rows go through the same kernels with the same
// accumulation order batched or alone (matmul_decode's rows are independent dot products,
// the f32 tiles accumulate each (row, token) alone), and its cache holds the same bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "batch_test_model.h"
#include "text/decoder.h"
#include "text/hparams.h"
#include "text/text_weights.h"

namespace vlkv {
namespace {

struct TinyModel {
  std::unique_ptr<GgufFile> gguf;
  TextHparams hp;
  TextWeights weights;
  std::unique_ptr<TextDecoder> decoder;
};

const TinyModel& tiny_model() {
  static TinyModel* m = [] {
    auto* t = new TinyModel;
    const std::string& path = batchtest::model_path();
    t->gguf = std::move(GgufFile::open(path)).value();
    t->hp = read_text_hparams(*t->gguf).value();
    t->weights = std::move(bind_text_weights(*t->gguf, t->hp, /*round_activations_q8=*/true)).value();
    t->decoder = std::make_unique<TextDecoder>(t->hp, t->weights);
    return t;
  }();
  return *m;
}

std::unique_ptr<KvCache> make_cache(const TinyModel& m, const std::string& method) {
  KvCacheConfig kc;
  kc.geometry = {static_cast<int>(m.hp.n_layers), static_cast<int>(m.hp.n_heads), static_cast<int>(m.hp.n_kv_heads),
                 static_cast<int>(m.hp.head_dim), 0};
  kc.method = method;
  kc.page_bytes = 4096;
  kc.budget_bytes = 64ull << 20;
  auto c = KvCache::create(kc);
  EXPECT_TRUE(c.is_ok()) << method << ": " << c.status().message();
  return c.is_ok() ? std::move(*c) : nullptr;
}

// One scripted sequence: joins at step `join`, feeds its prompt in chunks of kChunk, then
// decodes n_decode fixed tokens, then leaves.
struct Script {
  int join;
  int prompt_len;
  int n_decode;
};
constexpr int kChunk = 16;
const std::vector<Script> kScripts = {{0, 40, 6}, {0, 1, 10}, {2, 17, 8}, {3, 5, 3}, {5, 64, 5}, {6, 2, 9}};

int32_t script_token(size_t s, int i) { return static_cast<int32_t>(3 + (s * 131 + i * 37) % 500); }

// The inputs of one event (chunk or decode token) of one sequence.
struct Event {
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  std::vector<TokenKind> kinds;
  bool last_prompt_chunk_or_decode = false;
};

std::vector<Event> events_of(size_t s) {
  const Script& sc = kScripts[s];
  std::vector<Event> ev;
  int pos = 0;
  for (int b = 0; b < sc.prompt_len; b += kChunk) {
    Event e;
    for (int i = b; i < std::min(sc.prompt_len, b + kChunk); ++i) e.tokens.push_back(script_token(s, i));
    ev.push_back(e);
  }
  ev.back().last_prompt_chunk_or_decode = true;
  for (int i = 0; i < sc.n_decode; ++i) {
    Event e;
    e.tokens = {script_token(s, sc.prompt_len + i)};
    e.last_prompt_chunk_or_decode = true;
    ev.push_back(e);
  }
  // Sequences 0 and 4 have a run of visual tokens in their prompt (ids as embeddings, but
  // the methods' visual paths: ZipVL, VidKV, Q Cache VLA, AKVQ-VL treat them apart).
  const bool has_visual = s == 0 || s == 4;
  for (Event& e : ev) {
    for (size_t i = 0; i < e.tokens.size(); ++i) {
      const bool visual = has_visual && pos >= 3 && pos < sc.prompt_len - 3;
      e.kinds.push_back(visual ? TokenKind::kVisual : TokenKind::kText);
      e.positions.push_back(pos++);
    }
  }
  return ev;
}

DecoderInput input_of(const Event& e) {
  DecoderInput in;
  in.n_tokens = static_cast<int64_t>(e.tokens.size());
  in.tokens = e.tokens.data();
  in.positions = e.positions.data();
  in.kinds = e.kinds.data();
  return in;
}

// Runs kScripts batched in one cache (sequence s stored with methods[s]) and each alone in
// a cache of its own method; every logit must be equal.
void expect_batch_equals_solo(const std::vector<std::string>& methods) {
  const TinyModel& m = tiny_model();
  ThreadPool pool(2);
  std::vector<std::vector<Event>> events;
  for (size_t s = 0; s < kScripts.size(); ++s) events.push_back(events_of(s));

  // Solo: each sequence alone, event by event.
  std::map<std::pair<size_t, size_t>, std::vector<float>> solo;  // (seq, event) -> logits
  for (size_t s = 0; s < kScripts.size(); ++s) {
    auto solo_cache = make_cache(m, methods[s]);
    ASSERT_TRUE(solo_cache);
    const SeqId id = solo_cache->add_sequence().value();
    for (size_t e = 0; e < events[s].size(); ++e) {
      std::vector<float> logits;
      const LogitsMode mode = events[s][e].last_prompt_chunk_or_decode ? LogitsMode::kLast : LogitsMode::kNone;
      ASSERT_TRUE(m.decoder->forward(input_of(events[s][e]), *solo_cache, id, mode, logits, pool).is_ok());
      if (mode != LogitsMode::kNone) solo[{s, e}] = logits;
    }
    solo_cache->remove_sequence(id);
    EXPECT_EQ(solo_cache->bytes_in_use(), 0u);
  }

  // Batched: every sequence present at a step advances by one event; they join and leave.
  auto batch_cache = make_cache(m, "f16");
  ASSERT_TRUE(batch_cache);
  std::vector<SeqId> ids(kScripts.size(), -1);
  std::vector<size_t> next(kScripts.size(), 0);
  std::vector<std::vector<float>> out(kScripts.size());
  size_t n_compared = 0;
  int max_batch = 0;
  for (int step = 0; step < 100; ++step) {
    std::vector<BatchSequence> batch;
    std::vector<size_t> who;
    for (size_t s = 0; s < kScripts.size(); ++s) {
      if (step < kScripts[s].join || next[s] >= events[s].size()) continue;
      if (ids[s] < 0) ids[s] = batch_cache->add_sequence(methods[s]).value();
      BatchSequence b;
      b.seq = ids[s];
      b.in = input_of(events[s][next[s]]);
      b.mode = events[s][next[s]].last_prompt_chunk_or_decode ? LogitsMode::kLast : LogitsMode::kNone;
      b.logits = &out[s];
      batch.push_back(b);
      who.push_back(s);
    }
    if (batch.empty()) break;
    max_batch = std::max(max_batch, static_cast<int>(batch.size()));
    ASSERT_TRUE(m.decoder->forward_batch(batch, *batch_cache, pool).is_ok());
    for (size_t j = 0; j < batch.size(); ++j) {
      const size_t s = who[j];
      ASSERT_TRUE(batch[j].status.is_ok()) << batch[j].status.message();
      if (batch[j].mode != LogitsMode::kNone) {
        const std::vector<float>& ref = solo.at({s, next[s]});
        ASSERT_EQ(out[s].size(), ref.size());
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_EQ(out[s][i], ref[i]) << methods[s] << ": sequence " << s << " event " << next[s] << " logit " << i;
        ++n_compared;
      }
      if (++next[s] == events[s].size()) batch_cache->remove_sequence(ids[s]);  // leaves mid-run
    }
  }
  EXPECT_GE(max_batch, 4);
  size_t expected = 0;
  for (const Script& sc : kScripts) expected += 1 + sc.n_decode;
  EXPECT_EQ(n_compared, expected);
  EXPECT_EQ(batch_cache->bytes_in_use(), 0u);
}

class BatchEqualsSolo : public testing::TestWithParam<std::string> {};

TEST_P(BatchEqualsSolo, EveryLogitBitForBit) {
  expect_batch_equals_solo(std::vector<std::string>(kScripts.size(), GetParam()));
}

std::vector<std::string> method_names();

// Each sequence of a batch with its own method (one pool), every method in some batch.
TEST(ForwardBatch, MixedMethodsInOneBatchEqualSolo) {
  const std::vector<std::string> names = method_names();
  for (size_t offset = 0; offset < names.size(); offset += kScripts.size()) {
    std::vector<std::string> methods;
    for (size_t s = 0; s < kScripts.size(); ++s) methods.push_back(names[(offset + s) % names.size()]);
    expect_batch_equals_solo(methods);
  }
}

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (const MethodInfo* m : list_methods()) out.push_back(m->name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registered, BatchEqualsSolo, testing::ValuesIn(method_names()),
                         [](const auto& info) { return info.param; });

// A sequence with a bad token fails alone; its neighbours in the step commit.
TEST(ForwardBatch, BadInputFailsOnlyItsSequence) {
  const TinyModel& m = tiny_model();
  ThreadPool pool(2);
  auto cache = make_cache(m, "f16");
  ASSERT_TRUE(cache);
  const SeqId a = cache->add_sequence().value(), b = cache->add_sequence().value();
  const std::vector<int32_t> good = {5}, bad = {100000};
  const std::vector<int64_t> pos = {0};
  const std::vector<TokenKind> kinds = {TokenKind::kText};
  std::vector<float> la, lb;
  BatchSequence batch[2];
  for (int i = 0; i < 2; ++i) {
    batch[i].seq = i == 0 ? a : b;
    batch[i].in.n_tokens = 1;
    batch[i].in.tokens = (i == 0 ? good : bad).data();
    batch[i].in.positions = pos.data();
    batch[i].in.kinds = kinds.data();
    batch[i].logits = i == 0 ? &la : &lb;
  }
  ASSERT_TRUE(m.decoder->forward_batch(batch, *cache, pool).is_ok());
  EXPECT_TRUE(batch[0].status.is_ok());
  EXPECT_EQ(batch[1].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache->n_tokens(a), 1);
  EXPECT_EQ(cache->n_tokens(b), 0);
  EXPECT_EQ(la.size(), static_cast<size_t>(m.hp.n_vocab));
}

}  // namespace
}  // namespace vlkv
