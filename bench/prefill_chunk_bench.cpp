// One prompt chunk's attention over a deep cache, per KV method, in one run: what a long
// prefill (vlkv bench --fill prefill, -b 512) spends at its last chunks, without the
// weights' matmuls that are the same for every method. One layer of the issue-10 model's
// shape (16 query heads over 4 kv heads, head_dim 128); the cache is filled to --ctx
// tokens of random K/V through each method's store (KvCache::store_without_attention),
// then a --chunk-token step runs KvCache::attend (statistics, attention, store) and is
// rolled back; the best of --reps is kept. Prints wall and process CPU milliseconds
// (CPU time is steadier than wall time on a shared machine) and each method's ratio to f16.
//   prefill_chunk_bench [--ctx=16384] [--chunk=512] [--reps=3] [--threads=N]
//                       [--methods=f16,int4,kivi2,akvq_vl,vidkv,zipvl,zipvl:sparse=1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "bench_random.h"
#include "base/thread_pool.h"
#include "kv/kv_cache.h"

namespace vlkv {
namespace {

constexpr KvGeometry kGeom{1, 16, 4, 128};

struct Timing {
  double wall_ms = 0, cpu_ms = 0;
};

// Best wall and best CPU time (apart) of one chunk's attend over a ctx-token cache.
Timing run(const std::string& method, int64_t ctx, int chunk, int reps, ThreadPool& pool, std::string* error) {
  KvCacheConfig kc;
  kc.geometry = kGeom;
  kc.method = method;
  kc.budget_bytes = 4ull << 30;
  auto cache = KvCache::create(kc);
  if (!cache.is_ok()) {
    *error = cache.status().message();
    return {};
  }
  KvCache& c = **cache;
  const SeqId s = c.add_sequence().value();
  const int d = kGeom.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const size_t q_n = static_cast<size_t>(chunk) * kGeom.n_heads * d, kv_n = static_cast<size_t>(chunk) * kGeom.n_kv_heads * d;
  const std::vector<TokenKind> kinds(chunk, TokenKind::kText);
  for (int64_t t = 0; t < ctx; t += chunk) {  // the earlier chunks, stored as a prefill leaves them
    const int n = static_cast<int>(std::min<int64_t>(chunk, ctx - t));
    const auto q = random_normal(static_cast<size_t>(n) * kGeom.n_heads * d, 1 + static_cast<uint32_t>(t));
    const auto k = random_normal(static_cast<size_t>(n) * kGeom.n_kv_heads * d, 2 + static_cast<uint32_t>(t));
    const auto v = random_normal(k.size(), 3 + static_cast<uint32_t>(t));
    Status st = c.store_without_attention(s, 0, k.data(), v.data(), kinds.data(), n, q.data(), scale, &pool);
    if (!st.is_ok()) {
      *error = st.message();
      return {};
    }
    c.commit(s, n);
  }
  const auto q = random_normal(q_n, 7), k = random_normal(kv_n, 8), v = random_normal(kv_n, 9);
  std::vector<float> out(q_n);
  Timing best{1e30, 1e30};
  for (int r = 0; r < reps; ++r) {
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    Status st = c.attend(s, 0, q.data(), k.data(), v.data(), kinds.data(), chunk, scale, out.data(), pool);
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = 1e3 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    if (!st.is_ok()) {
      *error = st.message();
      return {};
    }
    c.rollback(s);
    best.wall_ms = std::min(best.wall_ms, wall);
    best.cpu_ms = std::min(best.cpu_ms, cpu);
  }
  return best;
}

}  // namespace
}  // namespace vlkv

int main(int argc, char** argv) {
  using namespace vlkv;
  int64_t ctx = 16384;
  int chunk = 512, reps = 3, threads = 0;
  std::string methods = "f16,int4,kivi2,akvq_vl,vidkv,zipvl,zipvl:sparse=1";
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--ctx=", 6) == 0) ctx = std::max<int64_t>(0, std::atoll(a + 6));
    else if (std::strncmp(a, "--chunk=", 8) == 0) chunk = std::max(1, std::atoi(a + 8));
    else if (std::strncmp(a, "--reps=", 7) == 0) reps = std::max(1, std::atoi(a + 7));
    else if (std::strncmp(a, "--threads=", 10) == 0) threads = std::max(0, std::atoi(a + 10));
    else if (std::strncmp(a, "--methods=", 10) == 0) methods = a + 10;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a);
      return 2;
    }
  }
  ThreadPool pool(threads > 0 ? threads : ThreadPool::default_threads());
  std::printf("one %d-token chunk over %lld cached tokens, one layer (16 q / 4 kv heads, d=128), %d threads, SIMD %s\n",
              chunk, static_cast<long long>(ctx), pool.n_threads(), simd_tier_name(simd_tier()));
  std::printf("%-20s %10s %10s %8s %8s\n", "method", "wall ms", "cpu ms", "wall/f16", "cpu/f16");
  Timing f16;
  size_t at = 0;
  while (at <= methods.size()) {
    const size_t comma = std::min(methods.find(',', at), methods.size());
    const std::string m = methods.substr(at, comma - at);
    at = comma + 1;
    if (m.empty()) continue;
    std::string error;
    const Timing t = run(m, ctx, chunk, reps, pool, &error);
    if (!error.empty()) {
      std::printf("%-20s error: %s\n", m.c_str(), error.c_str());
      continue;
    }
    if (m == "f16") f16 = t;
    std::printf("%-20s %10.1f %10.1f %8.2f %8.2f\n", m.c_str(), t.wall_ms, t.cpu_ms,
                f16.wall_ms > 0 ? t.wall_ms / f16.wall_ms : 0.0, f16.cpu_ms > 0 ? t.cpu_ms / f16.cpu_ms : 0.0);
  }
  return 0;
}
