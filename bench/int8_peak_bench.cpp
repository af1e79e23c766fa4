// The int8 multiply-add peak of this CPU: independent chains of vpdpbusd (64 MACs per zmm
// instruction, 32 per ymm), per thread count, as the reference for the prefill GEMM's fraction
// of peak (matmul_bench BM_Prefill q8=1 reports GFLOP/s = 2 * GMAC/s). Skipped without the ISA.
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "base/cpu_features.h"
#include "base/simd_dispatch.h"

namespace vlkv {
namespace {
constexpr int64_t kIters = 1 << 20;
constexpr int kChains = 12;  // > latency x throughput of every core we know
}  // namespace

VLKV_TARGET_BEGIN(VLKV_ISA_AVX512_VNNI)
namespace {
// kChains independent accumulators in registers (no memory barrier in the loop: it would
// spill them and time store-forwarding instead); V is __m512i or __m256i.
template <class V>
int64_t vpdpbusd_loop(int seed) {
  V acc[kChains];
  V a, b;
  if constexpr (sizeof(V) == 64) {
    a = _mm512_set1_epi8(static_cast<char>(seed + 1)), b = _mm512_set1_epi8(3);
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  } else {
    a = _mm256_set1_epi8(static_cast<char>(seed + 1)), b = _mm256_set1_epi8(3);
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi32(c);
  }
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) {
      if constexpr (sizeof(V) == 64) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
      else acc[c] = _mm256_dpbusd_epi32(acc[c], a, b);
    }
  }
  // Through memory: GCC 12 warns (falsely) on the 512 -> 128 cast.
  alignas(64) int32_t lanes[16];
  int64_t s = 0;
  for (int c = 0; c < kChains; ++c) {
    std::memcpy(lanes, &acc[c], sizeof(V));
    s += lanes[0];
  }
  return s;
}
}  // namespace
VLKV_TARGET_END

namespace {
// Args: {zmm (1) or ymm (0), threads}; reports GMAC/s over all threads.
void BM_VpdpbusdPeak(benchmark::State& state) {
  if (!cpu_features().avx512vnni) {
    state.SkipWithError("no AVX512_VNNI");
    return;
  }
  const bool zmm = state.range(0) != 0;
  const int n_threads = static_cast<int>(state.range(1));
  for (auto _ : state) {
    std::vector<std::thread> ts;
    std::vector<int64_t> out(static_cast<size_t>(n_threads));
    for (int t = 0; t < n_threads; ++t)
      ts.emplace_back([&, t] { out[static_cast<size_t>(t)] = zmm ? vpdpbusd_loop<__m512i>(t) : vpdpbusd_loop<__m256i>(t); });
    for (auto& th : ts) th.join();
    benchmark::DoNotOptimize(out.data());
  }
  const double macs = static_cast<double>(kIters) * kChains * (zmm ? 64 : 32) * n_threads;
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * macs * 1e-9,
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_VpdpbusdPeak)->ArgNames({"zmm", "threads"})->ArgsProduct({{1, 0}, {1, 2}})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
}  // namespace
}  // namespace vlkv

BENCHMARK_MAIN();
