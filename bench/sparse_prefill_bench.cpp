// Prefill attention of one layer, one step of an 8K-token prompt (KvCache::attend: the
// attention plus the method's store), for ZipVL's sparse prefill against the same method
// attending every key and against f16 (no statistics), in one run. 8 query heads over 2
// kv heads, head_dim 128. The prompt's attention is peaked as in a VLM's visual tokens:
// queries share a direction that a tenth of the keys carry (logit +6 over the rest), so
// the probe mass concentrates and tau = 0.97 keeps a minority of the keys. The summary
// prints each variant's time and its speedup over zipvl attending every key.
//   sparse_prefill_bench [--benchmark_filter=...] [--ctx=N]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_cache.h"

namespace vlkv {
namespace {

constexpr KvGeometry kGeom{1, 8, 2, 128};
int g_ctx = 8192;

ThreadPool& bench_pool() {
  static ThreadPool pool(ThreadPool::default_threads());
  return pool;
}

struct Prompt {
  std::vector<float> q, k, v;  // [n, heads, d]
};

const Prompt& prompt() {
  static const Prompt p = [] {
    const int n = g_ctx, d = kGeom.head_dim;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    Prompt p;
    p.q.resize(static_cast<size_t>(n) * kGeom.n_heads * d);
    p.k.resize(static_cast<size_t>(n) * kGeom.n_kv_heads * d);
    p.v.resize(p.k.size());
    for (auto& e : p.q) e = dist(rng);
    for (auto& e : p.k) e = dist(rng);
    for (auto& e : p.v) e = dist(rng);
    // scale 1/sqrt(d): a shared component c on channel 0 of queries and heavy keys adds c^2/sqrt(d).
    const float c = std::sqrt(6.0f * std::sqrt(static_cast<float>(d)));
    for (int i = 0; i < n; ++i) {
      for (int h = 0; h < kGeom.n_heads; ++h) p.q[(static_cast<size_t>(i) * kGeom.n_heads + h) * d] = c;
      for (int h = 0; h < kGeom.n_kv_heads; ++h)
        p.k[(static_cast<size_t>(i) * kGeom.n_kv_heads + h) * d] = i % 10 == 0 ? c : 0.0f;
    }
    return p;
  }();
  return p;
}

std::map<std::string, double>& seconds() {
  static std::map<std::string, double> s;
  return s;
}

void BM_PrefillAttention(benchmark::State& state, const std::string& method) {
  KvCacheConfig kc;
  kc.geometry = kGeom;
  kc.method = method;
  kc.budget_bytes = 1ull << 30;
  auto cache = KvCache::create(kc);
  if (!cache.is_ok()) {
    state.SkipWithError(cache.status().message().c_str());
    return;
  }
  const Prompt& p = prompt();
  std::vector<float> out(p.q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kGeom.head_dim));
  double total = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const SeqId s = (*cache)->add_sequence().value();
    state.ResumeTiming();
    const auto t0 = std::chrono::steady_clock::now();
    Status st = (*cache)->attend(s, 0, p.q.data(), p.k.data(), p.v.data(), nullptr, g_ctx, scale, out.data(),
                                 bench_pool());
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++runs;
    state.PauseTiming();
    if (!st.is_ok()) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    (*cache)->commit(s, g_ctx);
    (*cache)->remove_sequence(s);
    state.ResumeTiming();
  }
  if (runs) seconds()[method] = total / runs;
  state.counters["tokens"] = g_ctx;
}

void register_all() {
  for (const char* m : {"f16", "zipvl", "zipvl:sparse=1"})
    benchmark::RegisterBenchmark(("prefill_attention/" + std::string(m)).c_str(),
                                 [m](benchmark::State& s) { BM_PrefillAttention(s, m); })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3)
        ->UseRealTime();
}

}  // namespace
}  // namespace vlkv

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--ctx=", 6) == 0) {
      vlkv::g_ctx = std::max(64, std::atoi(argv[i] + 6));
      continue;
    }
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  vlkv::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const auto& s = vlkv::seconds();
  std::printf("\nprefill attention, one layer, %d tokens, %d threads (8 q heads / 2 kv heads, d=128):\n", vlkv::g_ctx,
              vlkv::bench_pool().n_threads());
  const auto full = s.find("zipvl");
  for (const auto& [m, sec] : s) {
    std::printf("  %-16s %9.1f ms", m.c_str(), sec * 1e3);
    if (full != s.end() && m != "zipvl") std::printf("  %.2fx zipvl attending every key", full->second / sec);
    std::printf("\n");
  }
  return 0;
}
