// Decode attention for one layer (one new token) over a cached context of 1K / 8K / 32K
// (and 128K with --ctx128k) tokens, for every registered KV method (new methods appear
// automatically; a method that refuses a geometry is skipped) and kivi2:dot=16 / int4:dot=8, head_dim 128 and 64,
// 8 query heads over 2 kv heads. Reports GB/s of cache bytes read (the bytes the layer's
// segments hold: compressed blocks plus any full-precision window), and in the same run
// a memory-bandwidth reference: a 2-thread streaming read and a 1-thread memcpy of a
// 256 MiB buffer. The summary at the end puts each method next to f16 at the same
// context (speedup) and next to the read bandwidth (% of bandwidth).
//   kv_attention_bench [--ctx128k] [--threads=N] [--also=SPEC;SPEC...] [google-benchmark flags, e.g. --benchmark_filter=kivi]
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <ctime>
#include <string>
#include <tuple>
#include <vector>

#include "base/cpu_features.h"
#include "base/process_cpu_time.h"
#include "bench_random.h"
#include "base/thread_pool.h"
#include "kv/attention.h"
#include "kv/codec_registry.h"
#include "kv/method_registry.h"
#include "kv/page_table.h"

namespace vlkv {
namespace {

int g_threads = 0;  // --threads N; 0: every hardware thread
ThreadPool& bench_pool() {
  static ThreadPool pool(g_threads > 0 ? g_threads : ThreadPool::default_threads());
  return pool;
}

struct Result {
  double seconds = 0;   // per decode step
  double cpu_seconds = 0;  // process CPU time per decode step (every pool thread, spinning included)
  double cpu_ns_per_tok = 0;  // cpu_seconds per (cached token, kv head), in ns
  double min_seconds = 0;  // fastest single step: on a loaded machine, the step nobody preempted
  double gb_s = 0;      // cache bytes read / second
  double cache_mb = 0;
  double bits = 0;
};
// (head_dim, ctx, method) -> fastest measurement
std::map<std::tuple<int, int64_t, std::string>, Result>& results() {
  static std::map<std::tuple<int, int64_t, std::string>, Result> r;
  return r;
}
double g_read_gb_s = 0, g_copy_gb_s = 0;

// Bytes of the codec blocks the layer's segments hold (what one decode step reads).
double layer_bytes(const LayerCache& layer) {
  double b = 0;
  for (const auto& h : layer.heads)
    for (const auto& s : h.segments) {
      if (s.k.present()) b += static_cast<double>(s.n_tokens / s.k.codec->tokens_per_block()) * s.k.block_bytes;
      b += static_cast<double>(s.n_tokens / s.v.codec->tokens_per_block()) * s.v.block_bytes;
    }
  return b;
}

void BM_DecodeAttention(benchmark::State& state, const std::string& method_name, int64_t ctx, int d) {
  const KvGeometry g{1, 8, 2, d};
  auto method = create_method(method_name, g);
  if (!method.is_ok()) return state.SkipWithError(method.status().message().c_str());
  static std::unique_ptr<PagePool> pool;  // one pool, big enough for the largest case
  if (!pool) pool = std::make_unique<PagePool>(8ull << 30, 64 * 1024);
  LayerCache layer;
  layer.heads.resize(g.n_kv_heads);
  layer.state = (*method)->new_layer_state(0);
  PendingStep pending;
  {
    LayerEditor ed(*pool, layer, pending, 0, d);
    const int64_t chunk = 4096;
    for (int64_t t = 0; t < ctx; t += chunk) {
      const int n = static_cast<int>(std::min(chunk, ctx - t));
      const auto k = random_normal(static_cast<size_t>(n) * g.n_kv_heads * d, 1 + static_cast<uint32_t>(t));
      const auto v = random_normal(static_cast<size_t>(n) * g.n_kv_heads * d, 2 + static_cast<uint32_t>(t));
      // Visual tokens: the long contexts this cache is for (images, video frames).
      const std::vector<TokenKind> kinds(n, TokenKind::kVisual);
      StoreInput in;
      in.n_cached = t;
      in.n_new = n;
      in.kinds = kinds.data();
      in.k = k.data();
      in.v = v.data();
      Status st = (*method)->store(in, ed);
      if (!st.is_ok()) {
        layer.for_each_page([&](PageId p) { pool->free(p); });
        return state.SkipWithError(st.message().c_str());
      }
    }
    layer.n_tokens = ctx;
  }
  auto f32 = make_codec("f32");
  const auto q = random_normal(static_cast<size_t>(g.n_heads) * d, 7);
  const auto kn = random_normal(static_cast<size_t>(g.n_kv_heads) * d, 8);
  const auto vn = random_normal(static_cast<size_t>(g.n_kv_heads) * d, 9);
  std::vector<float> out(q.size());
  const double bytes = layer_bytes(layer);
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  double min_step = 1e30;
  for (auto _ : state) {
    const auto s0 = std::chrono::steady_clock::now();
    attend_layer(layer, nullptr, **f32, q.data(), kn.data(), vn.data(), 1, 1.0f / std::sqrt(float(d)), out.data(),
                 AttendShape{g.n_heads, g.n_kv_heads, d}, bench_pool());
    benchmark::DoNotOptimize(out.data());
    min_step = std::min(min_step, std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = process_cpu_seconds() - cpu0;
  Result r;
  r.seconds = secs / static_cast<double>(state.iterations());
  r.cpu_seconds = cpu / static_cast<double>(state.iterations());
  r.cpu_ns_per_tok = r.cpu_seconds * 1e9 / (static_cast<double>(ctx) * g.n_kv_heads);
  r.min_seconds = min_step;
  r.gb_s = bytes / r.seconds / 1e9;
  r.cache_mb = bytes / 1e6;
  r.bits = (*method)->bits_per_element();
  // The fastest repetition (--benchmark_repetitions=N): on a shared machine the others are slowed by neighbours.
  auto [it, fresh] = results().try_emplace({d, ctx, method_name}, r);
  if (!fresh) {
    const double best_step = std::min(it->second.min_seconds, r.min_seconds);
    if (r.seconds < it->second.seconds) it->second = r;
    it->second.min_seconds = best_step;
  }
  state.counters["cache_GB/s"] = benchmark::Counter(bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["cache_MB"] = bytes / 1e6;
  state.counters["bits"] = r.bits;
  state.counters["cpu_us"] = r.cpu_seconds * 1e6;
  layer.for_each_page([&](PageId p) { pool->free(p); });
}

constexpr size_t kBwBytes = 256ull << 20;  // far larger than the last-level cache

__attribute__((target("avx2"))) double sum_avx2(const float* x, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  double s = 0;
  for (float e : t) s += e;
  return s;
}

// Streaming read of a 256 MiB buffer on every pool thread (each reads its share):
// the bandwidth the attention kernels can at best turn into cache bytes.
void BM_MemReadBandwidth(benchmark::State& state) {
  const size_t n = kBwBytes / sizeof(float);
  float* x = static_cast<float*>(std::aligned_alloc(64, kBwBytes));
  for (size_t i = 0; i < n; ++i) x[i] = 1.0f;
  ThreadPool& pool = bench_pool();
  std::vector<double> sums(pool.n_threads());
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    pool.parallel_for(pool.n_threads(), [&](int64_t b, int64_t e, int th) {
      for (int64_t part = b; part < e; ++part) {
        const size_t lo = n * part / pool.n_threads() / 32 * 32, hi = n * (part + 1) / pool.n_threads() / 32 * 32;
        sums[th] += sum_avx2(x + lo, hi - lo);
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_read_gb_s = std::max(g_read_gb_s, kBwBytes * static_cast<double>(state.iterations()) / secs / 1e9);  // best repetition
  state.counters["read_GB/s"] = benchmark::Counter(double(kBwBytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = pool.n_threads();
  std::free(x);
}

// memcpy of a 256 MiB buffer on one thread: bytes read per second.
void BM_MemcpyReference(benchmark::State& state) {
  std::vector<char> src(kBwBytes, 1), dst(kBwBytes);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBwBytes);
    benchmark::ClobberMemory();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_copy_gb_s = kBwBytes * static_cast<double>(state.iterations()) / secs / 1e9;
  state.counters["read_GB/s"] = benchmark::Counter(double(kBwBytes) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void print_summary() {
  if (results().empty()) return;
  std::printf("\nDecode attention, one layer, 8 q heads / 2 kv heads, %d threads, SIMD %s\n",
              bench_pool().n_threads(), simd_tier_name(simd_tier()));
  std::printf("bandwidth reference: %.2f GB/s streaming read (%d threads), %.2f GB/s memcpy read (1 thread)\n",
              g_read_gb_s, bench_pool().n_threads(), g_copy_gb_s);
  std::printf("cpu us/step: process CPU time (all threads, pool spinning included); ns/tok: that per (token, kv head);\n"
              "min us: the fastest single step (on a loaded machine the one nobody preempted)\n");
  std::printf("%-4s %7s %-34s %6s %10s %10s %9s %8s %8s %11s %7s %9s\n", "d", "ctx", "method", "bits", "cache MB", "us/step",
              "GB/s", "x f16", "% read", "cpu us/step", "ns/tok", "min us");
  for (const auto& [key, r] : results()) {
    const auto& [d, ctx, m] = key;
    const auto f16 = results().find({d, ctx, std::string("f16")});
    const double speedup = f16 != results().end() ? f16->second.seconds / r.seconds : 0;
    std::printf("%-4d %7lld %-34s %6.2f %10.2f %10.1f %9.2f %8.2f %7.0f%% %11.1f %7.1f %9.1f\n", d, static_cast<long long>(ctx),
                m.c_str(), r.bits, r.cache_mb, r.seconds * 1e6, r.gb_s, speedup,
                g_read_gb_s > 0 ? 100.0 * r.gb_s / g_read_gb_s : 0.0, r.cpu_seconds * 1e6, r.cpu_ns_per_tok,
                r.min_seconds * 1e6);
  }
}

}  // namespace
}  // namespace vlkv

int main(int argc, char** argv) {
  using namespace vlkv;
  bool long_ctx = false;
  std::vector<std::string> extra_specs;  // --also=SPEC;SPEC: more method specs to measure
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ctx128k") == 0) long_ctx = true;
    else if (std::strncmp(argv[i], "--threads=", 10) == 0) g_threads = std::atoi(argv[i] + 10);
    else if (std::strncmp(argv[i], "--also=", 7) == 0) {
      std::string list = argv[i] + 7;
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(';', at), list.size());
        if (end > at) extra_specs.push_back(list.substr(at, end - at));
        at = end + 1;
      }
    }
    else args.push_back(argv[i]);
  }
  int n_args = static_cast<int>(args.size());
  benchmark::Initialize(&n_args, args.data());
  // In the JSON output's "context" (and the console header): the tier the kernels ran at
  // (VLKV_SIMD caps it) and the threads the attention ran on.
  benchmark::AddCustomContext("simd", simd_tier_name(simd_tier()));
  benchmark::AddCustomContext("threads", std::to_string(bench_pool().n_threads()));
  benchmark::RegisterBenchmark("MemReadBandwidth", BM_MemReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("MemcpyReference", BM_MemcpyReference)->Unit(benchmark::kMillisecond)->UseRealTime();
  std::vector<int64_t> contexts = {1024, 8192, 32768};
  // Every registered method with its defaults, plus the 8-bit-dot variants of the tiled ones.
  std::vector<std::string> specs;
  for (const MethodInfo* m : list_methods()) specs.push_back(m->name);
  specs.push_back("kivi2:dot=16");  // 2-bit codes default to dot=8, 4-bit to 16 (intt::default_dot_bits)
  specs.push_back("int4:dot=8");
  specs.insert(specs.end(), extra_specs.begin(), extra_specs.end());
  if (long_ctx) contexts.push_back(131072);
  for (int d : {128, 64})
    for (int64_t ctx : contexts)
      for (const std::string& spec : specs) {
        const std::string name = "DecodeAttention/d" + std::to_string(d) + "/ctx" + std::to_string(ctx) + "/" + spec;
        benchmark::RegisterBenchmark(name.c_str(), [spec, ctx, d](benchmark::State& st) {
          BM_DecodeAttention(st, spec, ctx, d);
        })->Unit(benchmark::kMicrosecond)->UseRealTime();
      }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
