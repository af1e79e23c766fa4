// Scheduler: batched greedy generation equals each request run alone; admission and
// preemption under a tiny budget (a preempted request recomputes and ends with the same
// text); refusal of a request that can never fit; pool bytes back to zero; cancel; a
// stress test of random submit / step / cancel with the pool's invariants after each.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../text/batch_test_model.h"
#include "vlkv/engine.h"
#include "vlkv/scheduler.h"

namespace vlkv {
namespace {

std::unique_ptr<Engine> load(const std::string& method, uint64_t budget, uint32_t page_bytes = 4096) {
  EngineParams p;
  p.model_path = batchtest::model_path();
  p.kv_method = method;
  p.kv_budget_bytes = budget;
  p.kv_page_bytes = page_bytes;
  p.n_threads = 2;
  p.n_batch = 32;
  auto e = Engine::load(p);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  return e.is_ok() ? std::move(*e) : nullptr;
}

std::vector<int32_t> prompt_of(int i, int len) {
  std::vector<int32_t> t = {1};  // BOS
  for (int j = 1; j < len; ++j) t.push_back(3 + (i * 97 + j * 13) % 500);
  return t;
}

Request greedy(const std::vector<int32_t>& prompt, int max_tokens, const std::string& method = "") {
  Request r;
  r.prompt_tokens = prompt;
  r.generate.max_tokens = max_tokens;
  r.generate.ignore_eos = true;
  r.generate.sampling.temperature = 0.0f;
  r.kv_method = method;
  return r;
}

// The reference: one request alone through a Session (prompt in one eval, then one token a step).
std::vector<int32_t> solo_greedy(Engine& engine, const std::vector<int32_t>& prompt, int max_tokens) {
  auto s = engine.new_session();
  EXPECT_TRUE(s.is_ok());
  std::vector<float> logits;
  EXPECT_TRUE((*s)->eval(prompt, false, &logits).is_ok());
  std::vector<int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    int32_t best = 0;
    for (int32_t t = 1; t < static_cast<int32_t>(logits.size()); ++t)
      if (logits[t] > logits[best]) best = t;
    out.push_back(best);
    if (i + 1 < max_tokens) {
      EXPECT_TRUE((*s)->eval({best}, false, &logits).is_ok());
    }
  }
  return out;
}

void run_to_end(Scheduler& s, int max_steps = 100000) {
  for (int i = 0; i < max_steps && !s.idle(); ++i) ASSERT_TRUE(s.step().is_ok());
  ASSERT_TRUE(s.idle());
}

TEST(Scheduler, BatchedGreedyEqualsSolo) {
  auto engine = load("f16", 64ull << 20);
  ASSERT_TRUE(engine);
  auto sched = Scheduler::create(*engine);
  ASSERT_TRUE(sched.is_ok());
  const int lens[] = {5, 40, 17, 70, 2};
  std::vector<RequestId> ids;
  std::map<RequestId, std::vector<int32_t>> streamed;
  for (int i = 0; i < 5; ++i) {
    auto id = (*sched)->submit(greedy(prompt_of(i, lens[i]), 12 + i), [&streamed](const TokenEvent& ev) {
      if (!ev.finished) streamed[ev.id].push_back(ev.token);
      return true;
    });
    ASSERT_TRUE(id.is_ok()) << id.status().message();
    ids.push_back(*id);
    (*sched)->step().value();  // requests join while others run
  }
  run_to_end(**sched);
  for (int i = 0; i < 5; ++i) {
    auto st = (*sched)->poll(ids[i]);
    ASSERT_TRUE(st.is_ok());
    EXPECT_EQ(st->state, RequestState::kFinished);
    EXPECT_EQ(st->reason, FinishReason::kLength);
    EXPECT_EQ(st->tokens, streamed[ids[i]]);
    EXPECT_EQ(st->tokens, solo_greedy(*engine, prompt_of(i, lens[i]), 12 + i)) << "request " << i;
  }
  EXPECT_EQ(engine->kv_bytes_in_use(), 0u);
  EXPECT_EQ((*sched)->stats().kv_bytes_reserved, 0u);
}

TEST(Scheduler, PreemptedRequestsRecomputeAndMatchUninterruptedRuns) {
  // 4 KiB pages, f16: a 64-token request holds 16 pages (64 KiB); the budget holds about
  // three grown requests, and admission by prompt alone lets six start.
  auto engine = load("f16", 640ull << 10);
  ASSERT_TRUE(engine);
  SchedulerParams sp;
  sp.reserve_max_tokens = false;
  auto sched = Scheduler::create(*engine, sp);
  ASSERT_TRUE(sched.is_ok());
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back((*sched)->submit(greedy(prompt_of(i, 20 + i), 100)).value());
  int64_t peak_running = 0;
  for (int i = 0; i < 100000 && !(*sched)->idle(); ++i) {
    ASSERT_TRUE((*sched)->step().is_ok());
    const SchedulerStats st = (*sched)->stats();
    peak_running = std::max(peak_running, st.n_running);
    ASSERT_LE(st.kv_bytes_in_use, st.kv_budget_bytes);
  }
  EXPECT_GE(peak_running, 3);
  EXPECT_GT((*sched)->stats().n_preemptions, 0);
  int n_preempted = 0;
  auto reference = load("f16", 64ull << 20);
  for (int i = 0; i < 6; ++i) {
    auto st = (*sched)->poll(ids[i]).value();
    EXPECT_EQ(st.reason, FinishReason::kLength) << st.error.message();
    n_preempted += st.n_preemptions > 0;
    EXPECT_EQ(st.tokens, solo_greedy(*reference, prompt_of(i, 20 + i), 100)) << "request " << i;
  }
  EXPECT_GT(n_preempted, 0);
  EXPECT_EQ(engine->kv_bytes_in_use(), 0u);
}

TEST(Scheduler, RefusesARequestThatCanNeverFit) {
  auto engine = load("f16", 256ull << 10);
  ASSERT_TRUE(engine);
  auto sched = Scheduler::create(*engine);
  ASSERT_TRUE(sched.is_ok());
  auto r = (*sched)->submit(greedy(prompt_of(0, 200), 400));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(r.status().message().find("can never run"), std::string::npos) << r.status().message();
  // A small one still runs.
  auto ok = (*sched)->submit(greedy(prompt_of(1, 8), 4));
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  run_to_end(**sched);
  EXPECT_EQ((*sched)->poll(*ok)->tokens.size(), 4u);
}

TEST(Scheduler, RejectsBadRequests) {
  auto engine = load("f16", 8ull << 20);
  ASSERT_TRUE(engine);
  auto sched = Scheduler::create(*engine);
  ASSERT_TRUE(sched.is_ok());
  EXPECT_EQ((*sched)->submit(greedy({}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*sched)->submit(greedy({1, 99999}, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*sched)->submit(greedy({1, 2}, 0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*sched)->submit(greedy({1, 2}, 4, "nosuchmethod")).status().code(), StatusCode::kInvalidArgument);
  Request r = greedy({1, 2}, 4);
  r.generate.sampling.top_p = 2.0f;
  EXPECT_EQ((*sched)->submit(r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*sched)->poll(12345).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*sched)->cancel(12345).code(), StatusCode::kNotFound);
}

TEST(Scheduler, CancelAndCallbackStopFreeTheirPages) {
  auto engine = load("f16", 8ull << 20);
  ASSERT_TRUE(engine);
  auto sched = Scheduler::create(*engine);
  ASSERT_TRUE(sched.is_ok());
  const RequestId a = (*sched)->submit(greedy(prompt_of(0, 30), 50)).value();
  int seen = 0;
  const RequestId b = (*sched)->submit(greedy(prompt_of(1, 30), 50), [&seen](const TokenEvent& ev) {
    return ev.finished || ++seen < 3;  // stop after the third token
  }).value();
  for (int i = 0; i < 5; ++i) (*sched)->step().value();
  EXPECT_GT(engine->kv_bytes_in_use(), 0u);
  ASSERT_TRUE((*sched)->cancel(a).is_ok());
  run_to_end(**sched);
  EXPECT_EQ((*sched)->poll(a)->reason, FinishReason::kCancelled);
  EXPECT_EQ((*sched)->poll(b)->reason, FinishReason::kStopped);
  EXPECT_EQ((*sched)->poll(b)->tokens.size(), 3u);
  EXPECT_EQ(engine->kv_bytes_in_use(), 0u);
  EXPECT_TRUE((*sched)->release(a).is_ok());
  EXPECT_EQ((*sched)->poll(a).status().code(), StatusCode::kNotFound);
}

TEST(Scheduler, CancelOfAQueuedRequestEndsItAtOnce) {
  auto engine = load("f16", 8ull << 20);
  ASSERT_TRUE(engine);
  SchedulerParams sp;
  sp.max_sequences = 1;  // b and c wait behind a
  auto sched = Scheduler::create(*engine, sp);
  ASSERT_TRUE(sched.is_ok());
  const RequestId a = (*sched)->submit(greedy(prompt_of(0, 10), 8)).value();
  const RequestId b = (*sched)->submit(greedy(prompt_of(1, 10), 4)).value();
  std::vector<TokenEvent> c_events;
  const RequestId c = (*sched)->submit(greedy(prompt_of(2, 10), 4), [&c_events](const TokenEvent& ev) {
    c_events.push_back(ev);
    return true;
  }).value();
  (*sched)->step().value();
  EXPECT_EQ((*sched)->stats().n_queued, 2);
  // No step in between: c leaves the queue (it was behind b, not at the front) and hears its end.
  ASSERT_TRUE((*sched)->cancel(c).is_ok());
  EXPECT_EQ((*sched)->poll(c)->state, RequestState::kFinished);
  EXPECT_EQ((*sched)->poll(c)->reason, FinishReason::kCancelled);
  ASSERT_EQ(c_events.size(), 1u);
  EXPECT_TRUE(c_events[0].finished);
  EXPECT_EQ((*sched)->stats().n_queued, 1);
  run_to_end(**sched);
  EXPECT_EQ((*sched)->poll(a)->tokens.size(), 8u);
  EXPECT_EQ((*sched)->poll(b)->tokens.size(), 4u);
  EXPECT_EQ(c_events.size(), 1u);  // no second end
  EXPECT_EQ(engine->kv_bytes_in_use(), 0u);
}

TEST(Scheduler, BackgroundThreadAndWait) {
  auto engine = load("f16", 8ull << 20);
  ASSERT_TRUE(engine);
  auto sched = Scheduler::create(*engine);
  ASSERT_TRUE(sched.is_ok());
  ASSERT_TRUE((*sched)->start().is_ok());
  const RequestId a = (*sched)->submit(greedy(prompt_of(0, 10), 6)).value();
  const RequestId b = (*sched)->submit(greedy(prompt_of(1, 12), 7)).value();
  auto ra = (*sched)->wait(a), rb = (*sched)->wait(b);
  ASSERT_TRUE(ra.is_ok() && rb.is_ok());
  EXPECT_EQ(ra->tokens.size(), 6u);
  EXPECT_EQ(rb->tokens.size(), 7u);
  (*sched)->stop();
  EXPECT_EQ(engine->kv_bytes_in_use(), 0u);
}

// Random submit / step / cancel under a small budget, preemption on: after every operation
// the pool holds at most its budget, never more than the running requests could, and
// nothing once all are done.
TEST(Scheduler, StressRandomJoinStepLeave) {
  auto engine = load("f16", 1ull << 20);
  ASSERT_TRUE(engine);
  SchedulerParams sp;
  sp.reserve_max_tokens = false;
  sp.max_step_prompt_tokens = 48;
  auto sched = Scheduler::create(*engine, sp);
  ASSERT_TRUE(sched.is_ok());
  std::mt19937 rng(7);
  std::vector<RequestId> live;
  int n_submitted = 0;
  for (int op = 0; op < 3000; ++op) {
    const int what = static_cast<int>(rng() % 10);
    if (what < 2 && n_submitted < 300) {
      const int len = 1 + static_cast<int>(rng() % 60);
      const int max_tokens = 1 + static_cast<int>(rng() % 40);
      live.push_back((*sched)->submit(greedy(prompt_of(n_submitted, len), max_tokens)).value());
      ++n_submitted;
    } else if (what == 2 && !live.empty()) {
      ASSERT_TRUE((*sched)->cancel(live[rng() % live.size()]).is_ok());
    } else {
      ASSERT_TRUE((*sched)->step().is_ok());
    }
    const SchedulerStats st = (*sched)->stats();
    ASSERT_LE(st.kv_bytes_in_use, st.kv_budget_bytes);
    if (st.n_running == 0) {
      ASSERT_EQ(st.kv_bytes_in_use, 0u) << "op " << op;
    }
  }
  run_to_end(**sched);
  for (RequestId id : live) {
    auto st = (*sched)->poll(id).value();
    ASSERT_EQ(st.state, RequestState::kFinished);
    EXPECT_TRUE(st.reason == FinishReason::kLength || st.reason == FinishReason::kCancelled)
        << static_cast<int>(st.reason) << " " << st.error.message();
  }
  EXPECT_EQ(engine->kv_bytes_in_use(), 0u);
  EXPECT_EQ((*sched)->stats().kv_bytes_reserved, 0u);
}

// Each request with its own KV method in one pool: each equals a run alone on an engine of
// that method, and the pool's bytes return to zero.
TEST(Scheduler, PerRequestKvMethodsInOnePool) {
  auto engine = load("f16", 64ull << 20);
  ASSERT_TRUE(engine);
  auto sched = Scheduler::create(*engine);
  ASSERT_TRUE(sched.is_ok());
  const std::vector<std::string> methods = {"f16", "kivi2", "int4", "vidkv"};
  std::vector<RequestId> ids;
  for (size_t i = 0; i < methods.size(); ++i)
    ids.push_back((*sched)->submit(greedy(prompt_of(static_cast<int>(i), 24), 40, methods[i])).value());
  run_to_end(**sched);
  for (size_t i = 0; i < methods.size(); ++i) {
    auto alone = load(methods[i], 64ull << 20);
    ASSERT_TRUE(alone);
    EXPECT_EQ((*sched)->poll(ids[i])->tokens, solo_greedy(*alone, prompt_of(static_cast<int>(i), 24), 40)) << methods[i];
  }
  EXPECT_EQ(engine->kv_bytes_in_use(), 0u);
}

}  // namespace
}  // namespace vlkv
