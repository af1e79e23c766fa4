// Weight-format dot throughput: one f32 activation row against every row of a weight
// matrix, per format and SIMD level, in GB/s of weight bytes read. "cold" streams a
// 4096x4096 matrix (larger than the caches, like decode); "hot" re-reads 64 rows that
// fit in L2 (the compute ceiling). memcpy of a 64 MiB buffer is the bandwidth reference.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "quant/k_packed.h"
#include "quant/weight_format.h"

namespace vlkv {
namespace {

constexpr int64_t kCols = 4096;

struct Matrix {
  std::vector<uint8_t> bytes;  // [rows][row_bytes]
  size_t row_bytes = 0;
  int64_t rows = 0;
};

// Quantizes 16 distinct random rows and tiles them (every byte is still read from memory).
Matrix make_matrix(const WeightFormat& f, int64_t rows) {
  Matrix m;
  m.rows = rows;
  m.row_bytes = row_bytes(f.type, kCols).value();
  m.bytes.resize(m.row_bytes * static_cast<size_t>(rows));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> src(kCols);
  const int64_t distinct = std::min<int64_t>(16, rows);
  for (int64_t r = 0; r < distinct; ++r) {
    for (auto& v : src) v = dist(rng);
    f.quantize_row_ref(src.data(), m.bytes.data() + r * m.row_bytes, kCols);
  }
  for (int64_t r = distinct; r < rows; ++r) {
    std::memcpy(m.bytes.data() + r * m.row_bytes, m.bytes.data() + (r % distinct) * m.row_bytes, m.row_bytes);
  }
  return m;
}

// A random activation row, as f32 and rounded to 8-bit blocks.
std::vector<float> bench_x(Q8Activations& xq) {
  std::vector<float> x(kCols);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  quantize_activations_q8(x.data(), kCols, xq);
  return x;
}

// GB/s of the matrix's bytes, read once per iteration.
void report_bytes(benchmark::State& state, const Matrix& m) {
  const double bytes = static_cast<double>(m.bytes.size());
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// q8: activations rounded to 8-bit blocks (the decode path, WeightFormat::dot_q8).
void bm_dot(benchmark::State& state, const WeightFormat* f, SimdLevel level, int64_t rows, bool q8) {
  const SimdLevel saved = simd_level();
  set_simd_level_for_testing(level);
  const Matrix m = make_matrix(*f, rows);
  Q8Activations xq;
  const std::vector<float> x = bench_x(xq);
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    if (q8) {
      for (int64_t r = 0; r < rows; ++r) y[r] = f->dot_q8(m.bytes.data() + r * m.row_bytes, xq, kCols);
    } else {
      for (int64_t r = 0; r < rows; ++r) y[r] = f->dot(m.bytes.data() + r * m.row_bytes, x.data(), kCols);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report_bytes(state, m);
  state.counters["bits/w"] = 8.0 * static_cast<double>(m.row_bytes) / kCols;
  set_simd_level_for_testing(saved);
}

// The decode matvec (WeightFormat::dot_q8_strided, 16 rows per call as kernels/matmul.cpp
// calls it) at one SIMD tier.
void bm_strided(benchmark::State& state, const WeightFormat* f, SimdTier tier, int64_t rows) {
  set_simd_tier_for_testing(tier);
  const Matrix m = make_matrix(*f, rows);
  Q8Activations xq;
  const std::vector<float> x = bench_x(xq);
  std::vector<float> y(static_cast<size_t>(rows));
  constexpr int kChunk = kLaneRows + 1;
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; r += kChunk)
      f->dot_q8_strided(m.bytes.data() + r * m.row_bytes, static_cast<int64_t>(m.row_bytes),
                        static_cast<int>(std::min<int64_t>(kChunk, rows - r)), xq, kCols, y.data() + r);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report_bytes(state, m);
  set_simd_tier_for_testing(simd_tier_default());
}

// The decode matvec over rows repacked 8 at a time (quant/k_packed.h), as kernels/matmul.cpp
// calls it for packed matrices, at one SIMD tier.
void bm_packed(benchmark::State& state, const WeightFormat* f, SimdTier tier, int64_t rows) {
  set_simd_tier_for_testing(tier);
  Matrix m = make_matrix(*f, rows);
  std::vector<uint8_t> packed(m.bytes.size());
  quant::pack_rows8(f->type, m.bytes.data(), rows, m.row_bytes, packed.data());
  m.bytes.swap(packed);
  Q8Activations xq;
  const std::vector<float> x = bench_x(xq);
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; r += quant::kPackRows)
      quant::dot_q8_packed8(*f, m.bytes.data() + r * m.row_bytes, m.row_bytes, xq, kCols, y.data() + r);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  report_bytes(state, m);
  set_simd_tier_for_testing(simd_tier_default());
}

void bm_memcpy(benchmark::State& state) {
  const size_t n = size_t{64} << 20;
  std::vector<uint8_t> a(n, 1), b(n, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(n) * state.iterations());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  benchmark::RegisterBenchmark("memcpy/64MiB(bytes read)", bm_memcpy)->Unit(benchmark::kMillisecond);
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                            GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                            GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  std::vector<SimdLevel> levels;
  const SimdLevel saved = simd_level();
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    set_simd_level_for_testing(l);
    if (simd_level() == l) levels.push_back(l);
  }
  set_simd_level_for_testing(saved);
  for (GgmlType t : types) {
    const WeightFormat* f = find_weight_format(t);
    for (SimdLevel l : levels) {
      for (const auto& [label, rows] : {std::pair<const char*, int64_t>{"cold", 4096}, {"hot", 64}}) {
        const std::string name = std::string("dot/") + f->name + "/" + simd_level_name(l) + "/" + label;
        benchmark::RegisterBenchmark(name.c_str(), bm_dot, f, l, rows, false)->Unit(benchmark::kMicrosecond);
        if (f->dot_q8_strided && l == levels.front()) {  // once per format, at every tier
          if (rows > 64) {  // and 16x the rows: past the last-level cache of one CPU complex, streamed from DRAM
            const std::string dram = std::string("dot_q8_strided/") + f->name + "/" + simd_tier_name(simd_tier_default()) + "/dram";
            benchmark::RegisterBenchmark(dram.c_str(), bm_strided, f, simd_tier_default(), 16 * rows)->Unit(benchmark::kMicrosecond);
            if (quant::can_pack_rows8(t, rows, kCols)) {
              const std::string pd = std::string("dot_q8_packed8/") + f->name + "/" + simd_tier_name(simd_tier_default()) + "/dram";
              benchmark::RegisterBenchmark(pd.c_str(), bm_packed, f, simd_tier_default(), 16 * rows)->Unit(benchmark::kMicrosecond);
            }
          }
          for (SimdTier tier : supported_simd_tiers()) {
            const std::string st_name = std::string("dot_q8_strided/") + f->name + "/" + simd_tier_name(tier) + "/" + label;
            benchmark::RegisterBenchmark(st_name.c_str(), bm_strided, f, tier, rows)->Unit(benchmark::kMicrosecond);
            if (quant::can_pack_rows8(t, rows, kCols)) {
              const std::string pk = std::string("dot_q8_packed8/") + f->name + "/" + simd_tier_name(tier) + "/" + label;
              benchmark::RegisterBenchmark(pk.c_str(), bm_packed, f, tier, rows)->Unit(benchmark::kMicrosecond);
            }
          }
        }
        if (f->dot_q8) {
          const std::string q8_name = std::string("dot_q8/") + f->name + "/" + simd_level_name(l) + "/" + label;
          benchmark::RegisterBenchmark(q8_name.c_str(), bm_dot, f, l, rows, true)->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
}

}  // namespace
}  // namespace vlkv

int main(int argc, char** argv) {
  vlkv::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
