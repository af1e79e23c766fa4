// Decode attention for one layer over a cached context (1K / 8K / 32K tokens) for
// each storage method, reporting GB/s of cache bytes read, next to a plain memcpy
// of a buffer of the same size in the same run (the memory-bandwidth reference).
// The cache is filled through the method's store path (no prefill attention).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kv/attention.h"
#include "kv/codec_registry.h"
#include "kv/method_registry.h"
#include "kv/page_table.h"

namespace vlkv {
namespace {

ThreadPool& bench_pool() {
  static ThreadPool pool(ThreadPool::default_threads());
  return pool;
}

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

// args: context tokens, head_dim, method index (0 f32, 1 f16). 8 query heads, 2 kv heads.
void BM_DecodeAttention(benchmark::State& state) {
  const int64_t ctx = state.range(0);
  const int d = static_cast<int>(state.range(1));
  const std::string method_name = state.range(2) == 0 ? "f32" : "f16";
  const KvGeometry g{1, 8, 2, d};
  auto method = create_method(method_name, g);
  if (!method.is_ok()) return state.SkipWithError(method.status().message().c_str());
  PagePool pool(4ull << 30, 64 * 1024);
  LayerCache layer;
  layer.heads.resize(g.n_kv_heads);
  PendingStep pending;
  {
    LayerEditor ed(pool, layer, pending, 0, d);
    const int64_t chunk = 1024;
    for (int64_t t = 0; t < ctx; t += chunk) {
      const auto k = random_vec(chunk * g.n_kv_heads * d, 1 + t), v = random_vec(chunk * g.n_kv_heads * d, 2 + t);
      StoreInput in;
      in.n_new = static_cast<int>(std::min(chunk, ctx - t));
      in.k = k.data();
      in.v = v.data();
      if (!(*method)->store(in, ed).is_ok()) return state.SkipWithError("store failed");
    }
  }
  auto f32 = make_codec("f32");
  const auto q = random_vec(g.n_heads * d, 7), kn = random_vec(g.n_kv_heads * d, 8), vn = random_vec(g.n_kv_heads * d, 9);
  std::vector<float> out(q.size());
  const double bytes = (*method)->bytes_per_token() * static_cast<double>(ctx);  // K+V of both kv heads
  for (auto _ : state) {
    attend_layer(layer, nullptr, **f32, q.data(), kn.data(), vn.data(), 1, 1.0f / std::sqrt(float(d)), out.data(),
                 AttendShape{g.n_heads, g.n_kv_heads, d}, bench_pool());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["cache_GB/s"] = benchmark::Counter(bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["cache_MB"] = bytes / 1e6;
  state.SetLabel(method_name);
  layer.for_each_page([&](PageId p) { pool.free(p); });
}

// memcpy of a buffer as large as the f32 cache of the same shape: bytes read per second.
void BM_MemcpyReference(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) * 2 * 2 * state.range(1) * 4;
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.counters["read_GB/s"] = benchmark::Counter(double(bytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["cache_MB"] = bytes / 1e6;
}

void Args(benchmark::internal::Benchmark* b) {
  for (int d : {128, 64})
    for (int64_t ctx : {1024, 8192, 32768})
      for (int m : {0, 1}) b->Args({ctx, d, m});
}
void MemArgs(benchmark::internal::Benchmark* b) {
  for (int d : {128, 64})
    for (int64_t ctx : {1024, 8192, 32768}) b->Args({ctx, d});
}

BENCHMARK(BM_DecodeAttention)->Apply(Args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MemcpyReference)->Apply(MemArgs)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace vlkv

BENCHMARK_MAIN();
