// matmul throughput: decode matvec in GB/s of weight bytes (next to a memcpy bandwidth
// reference from the same run) and prefill matmul in GFLOP/s, per weight format and thread count.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

struct BenchMatrix {
  std::vector<uint8_t> bytes;  // [n_rows, row_bytes]
  WeightMatrix w;
};

BenchMatrix make_matrix(GgmlType type, int64_t n_rows, int64_t n_cols) {
  BenchMatrix m;
  const WeightFormat* fmt = find_weight_format(type);
  if (!fmt) return m;
  const size_t rb = static_cast<size_t>(n_cols / fmt->block_elems) * fmt->block_bytes;
  m.bytes.resize(n_rows * rb);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> row(n_cols);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (auto& v : row) v = dist(rng);
    fmt->quantize_row_ref(row.data(), m.bytes.data() + r * rb, n_cols);
  }
  m.w = WeightMatrix{type, m.bytes.data(), n_rows, n_cols, rb};
  return m;
}

// The format of type, named in the label; null (the benchmark skipped) if not implemented.
const WeightFormat* format_or_skip(benchmark::State& state, GgmlType type) {
  const WeightFormat* fmt = find_weight_format(type);
  if (!fmt) {
    state.SkipWithError("weight format not implemented");
    return nullptr;
  }
  state.SetLabel(fmt->name);
  return fmt;
}

// Args: {type, n_rows, n_cols, n_tokens, n_threads, q8}; q8: activations rounded to 8 bits
// (WeightMatrix::round_activations_q8: decode's integer dots, prefill's int8 GEMM for the block formats;
// 0 is --exact-matmul's f32 path).
void BM_Matmul(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t n_rows = state.range(1), n_cols = state.range(2), n_tokens = state.range(3);
  const int n_threads = static_cast<int>(state.range(4));
  const bool q8 = state.range(5) != 0;
  const WeightFormat* fmt = format_or_skip(state, type);
  if (!fmt) return;
  BenchMatrix m = make_matrix(type, n_rows, n_cols);
  m.w.round_activations_q8 = q8;
  std::vector<float> x(n_tokens * n_cols, 0.5f), y(n_tokens * n_rows);
  ThreadPool pool(n_threads);
  for (auto _ : state) {
    matmul(m.w, x.data(), n_tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  if (n_tokens == 1) {
    state.counters["GB/s"] = benchmark::Counter(iters * static_cast<double>(m.bytes.size()) * 1e-9,
                                                benchmark::Counter::kIsRate);
  } else {
    state.counters["GFLOP/s"] = benchmark::Counter(
        iters * 2.0 * static_cast<double>(n_rows * n_cols * n_tokens) * 1e-9, benchmark::Counter::kIsRate);
  }
}

// A batched decode step's weight GEMM: n_x decode rows (8-bit activations) against one
// weight matrix, in GMAC/s. Args: {type, n_rows, n_cols, n_x, n_threads}.
void BM_DecodeRows(benchmark::State& state) {
  const auto type = static_cast<GgmlType>(state.range(0));
  const int64_t n_rows = state.range(1), n_cols = state.range(2), n_x = state.range(3);
  const int n_threads = static_cast<int>(state.range(4));
  const WeightFormat* fmt = format_or_skip(state, type);
  if (!fmt) return;
  BenchMatrix m = make_matrix(type, n_rows, n_cols);
  m.w.round_activations_q8 = true;
  std::vector<float> x(n_x * n_cols), y(n_x * n_rows);
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  ThreadPool pool(n_threads);
  for (auto _ : state) {
    matmul_decode(m.w, x.data(), n_x, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GMAC/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(n_rows * n_cols * n_x) * 1e-9,
      benchmark::Counter::kIsRate);
}

// The bandwidth a decode matvec can hope for: memcpy of a buffer the size of the largest
// weight matrix (5632 x 2048 f32 = 46 MB, out of cache), split across n_threads.
void BM_MemcpyReference(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const int n_threads = static_cast<int>(state.range(1));
  std::vector<uint8_t> src(bytes, 1), dst(bytes);
  ThreadPool pool(n_threads);
  const int64_t n_chunks = 64;
  for (auto _ : state) {
    pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1, int) {
      const size_t b0 = bytes * c0 / n_chunks, b1 = bytes * c1 / n_chunks;
      std::memcpy(dst.data() + b0, src.data() + b0, b1 - b0);
    });
    benchmark::ClobberMemory();
  }
  // Read bandwidth is what matvec needs; memcpy also writes as much, reported separately.
  state.counters["read GB/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * bytes * 1e-9,
                                                   benchmark::Counter::kIsRate);
  state.counters["read+write GB/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * bytes * 1e-9, benchmark::Counter::kIsRate);
}

void decode_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "rows", "cols", "tokens", "threads", "q8"});
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K})
    for (int64_t rows : {2048, 5632, 32000})
      for (int threads : {1, 2})
        for (int q8 : {0, 1}) {
          const bool has_q8 = find_weight_format(t) && find_weight_format(t)->dot_q8;
          if (q8 && !has_q8) continue;
          b->Args({static_cast<int64_t>(t), rows, 2048, 1, threads, q8});
        }
}

void prefill_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "rows", "cols", "tokens", "threads", "q8"});
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                     GgmlType::kQ5_K, GgmlType::kQ6_K})
    for (int64_t rows : {2048, 5632})
      for (int64_t tokens : {64, 512})
        for (int threads : {1, 2})
          for (int q8 : {0, 1}) {  // q8: the int8 GEMM (kernels/gemm_q8.h) where the format has one
            if (q8 && (t == GgmlType::kF32 || t == GgmlType::kF16)) continue;
            b->Args({static_cast<int64_t>(t), rows, 2048, tokens, threads, q8});
          }
  // The FFN's down projection: K = 5632.
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K})
    for (int threads : {1, 2})
      for (int q8 : {0, 1}) b->Args({static_cast<int64_t>(t), 2048, 5632, 512, threads, q8});
}

BENCHMARK(BM_MemcpyReference)->ArgNames({"bytes", "threads"})->Args({5632 * 2048 * 4, 1})->Args({5632 * 2048 * 4, 2})
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeRows)
    ->ArgNames({"type", "rows", "cols", "n_x", "threads"})
    ->ArgsProduct({{static_cast<int64_t>(GgmlType::kQ8_0)}, {2048}, {2048}, {1, 2, 3, 4, 6, 8, 16, 73}, {1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Matmul)->Name("BM_Decode")->Apply(decode_args)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Matmul)->Name("BM_Prefill")->Apply(prefill_args)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vlkv

BENCHMARK_MAIN();
