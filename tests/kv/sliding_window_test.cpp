// Sliding-window layers (Gemma 3's local layers, KvGeometry::layer_window) under every
// registered KV method: each step's attention output against a double reference over the
// stored rows (read_back, in sequence order) with llama.cpp's mask - key position pk is
// hidden from the query at pq when pq - pk >= W - on the windowed layer, full causal on the
// other; a non-causal step (a Gemma 3 image chunk) lets its tokens see later ones of the
// step too. Out-of-order storage (ZipVL's important tokens, AKVQ-VL's staging) must be
// masked by position, not by storage index.
#include <gtest/gtest.h>

#include <cmath>

#include "base/thread_pool.h"
#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (const MethodInfo* m : list_methods()) out.push_back(m->name);
  return out;
}

constexpr int kWindow = 20;

KvGeometry windowed_geometry() {
  KvGeometry g{2, 4, 2, 64};
  g.layer_window = {kWindow, 0};  // layer 0 slides, layer 1 is global
  return g;
}

// Tolerance as the method conformance test derives it (method_conformance_test.cpp): f32
// sums, plus what a codec's fused rounding of queries / probabilities does through the softmax.
double stored_rows_tolerance(const KvCacheStats& cache) {
  auto m = create_method(cache.method_name(), windowed_geometry());
  if (!m.is_ok()) return 1e-4;
  int bits = 0;
  for (const Codec* c : (*m)->codecs()) {
    const Codec::FusedRounding r = c->fused_rounding(64);
    for (int b : {r.query_bits, r.prob_bits})
      if (b > 0 && (bits == 0 || b < bits)) bits = b;
  }
  if (bits == 0) return 1e-4;
  return bits >= 14 ? 1e-4 + 160.0 * std::ldexp(1.0, -bits) : 0.75;
}

class EveryMethodWindowed : public ::testing::TestWithParam<std::string> {};

// One step of n_new tokens on both layers, each output row checked against the reference.
// Returns the largest relative error seen.
double step(KvCache& cache, SeqId seq, std::vector<std::vector<float>>& hk, std::vector<std::vector<float>>& hv,
            int n_new, bool non_causal, uint32_t seed, ThreadPool& pool) {
  const KvGeometry g = windowed_geometry();
  const int d = g.head_dim, group = g.n_heads / g.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t n_cached = cache.n_tokens(seq);
  const double tol = stored_rows_tolerance(cache);
  double worst = 0;
  for (int l = 0; l < g.n_layers; ++l) {
    auto q = random_vec(static_cast<size_t>(n_new) * g.n_heads * d, seed + 3 * l, -2.0f, 2.0f);
    auto k = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, seed + 3 * l + 1, -2.0f, 2.0f);
    auto v = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, seed + 3 * l + 2, -1.0f, 1.0f);
    std::vector<std::vector<float>> sk(g.n_kv_heads), sv(g.n_kv_heads);
    for (int h = 0; h < g.n_kv_heads; ++h) EXPECT_TRUE(cache.read_back(seq, l, h, &sk[h], &sv[h]).is_ok());
    std::vector<float> out(q.size());
    std::vector<TokenKind> kinds(n_new, non_causal ? TokenKind::kVisual : TokenKind::kText);
    Status st = cache.attend(seq, l, q.data(), k.data(), v.data(), kinds.data(), n_new, scale, out.data(), pool,
                             nullptr, non_causal);
    EXPECT_TRUE(st.is_ok()) << st.message();
    if (!st.is_ok()) return 1e9;
    hk[l].insert(hk[l].end(), k.begin(), k.end());
    hv[l].insert(hv[l].end(), v.begin(), v.end());
    for (int h = 0; h < g.n_kv_heads; ++h) {
      const int64_t total = n_cached + n_new;
      std::vector<float> keys(total * d), vals(total * d);
      for (int64_t t = 0; t < total; ++t)
        for (int i = 0; i < d; ++i) {
          const size_t src = (t * g.n_kv_heads + h) * d + i;
          keys[t * d + i] = t < n_cached ? sk[h][t * d + i] : hk[l][src];
          vals[t * d + i] = t < n_cached ? sv[h][t * d + i] : hv[l][src];
        }
      std::vector<double> ref(d);
      for (int i = 0; i < n_new; ++i) {
        const int64_t p = n_cached + i;
        const int64_t hi = non_causal ? total : p + 1;  // keys [lo, hi)
        const int64_t lo = g.window(l) > 0 ? std::max<int64_t>(0, p - g.window(l) + 1) : 0;
        for (int hh = 0; hh < group; ++hh) {
          const size_t row = (static_cast<size_t>(i) * g.n_heads + h * group + hh) * d;
          kvtest::ref_attention_row(&q[row], &keys[lo * d], &vals[lo * d], hi - lo, d, scale, ref.data());
          const double e = kvtest::rel_err(&out[row], ref.data(), d);
          worst = std::max(worst, e);
          EXPECT_LT(e, tol) << "layer " << l << " token " << p;
        }
      }
    }
  }
  cache.commit(seq, n_new);
  return worst;
}

TEST_P(EveryMethodWindowed, AttentionSeesOnlyTheWindowOnLocalLayers) {
  ThreadPool pool(2);
  auto cache = kvtest::small_page_cache(GetParam(), windowed_geometry());
  ASSERT_TRUE(cache);
  auto seq = cache->add_sequence();
  ASSERT_TRUE(seq.is_ok());
  std::vector<std::vector<float>> hk(2), hv(2);
  double worst = step(*cache, *seq, hk, hv, 37, false, 11, pool);  // text prompt, longer than the window
  worst = std::max(worst, step(*cache, *seq, hk, hv, 16, true, 23, pool));  // an image chunk, non-causal
  worst = std::max(worst, step(*cache, *seq, hk, hv, 9, false, 37, pool));
  for (int i = 0; i < 300 && !HasFailure(); ++i)  // decode far past the window: folds, page boundaries
    worst = std::max(worst, step(*cache, *seq, hk, hv, 1, false, 1000 + 7 * i, pool));
  std::printf("[ %s ] windowed attention vs reference: max rel err %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Registered, EveryMethodWindowed, ::testing::ValuesIn(method_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// The window is what llama.cpp's mask says, checked with the f32 method on hand-made keys:
// a decode query at position p whose only strongly matching key sits at p - W (just out)
// must not see it; at p - W + 1 it must.
TEST(SlidingWindow, EdgeOfTheWindowIsExclusive) {
  ThreadPool pool(1);
  KvGeometry g{1, 1, 1, 4};
  g.layer_window = {4};
  for (int64_t back : {4, 3}) {
    auto cache = kvtest::small_page_cache("f32", g);
    ASSERT_TRUE(cache);
    auto seq = cache->add_sequence();
    ASSERT_TRUE(seq.is_ok());
    const int n = 10;
    std::vector<float> k(n * 4, 0.0f), v(n * 4, 0.0f), q(n * 4, 0.0f), out(n * 4);
    const int64_t p = n;  // the decode token's position
    k[(p - back) * 4] = 1.0f;  // the one key that matches
    v[(p - back) * 4 + 1] = 1.0f;
    ASSERT_TRUE(cache->attend(*seq, 0, q.data(), k.data(), v.data(), nullptr, n, 1.0f, out.data(), pool).is_ok());
    cache->commit(*seq, n);
    const float qd[4] = {50.0f, 0, 0, 0}, kd[4] = {0, 0, 0, 0}, vd[4] = {0, 0, 0, 0};
    float o[4];
    ASSERT_TRUE(cache->attend(*seq, 0, qd, kd, vd, nullptr, 1, 1.0f, o, pool).is_ok());
    cache->commit(*seq, 1);
    if (back == 4) EXPECT_LT(o[1], 1e-6f) << "the key at p - W is outside the window";
    else EXPECT_GT(o[1], 0.99f) << "the key at p - W + 1 is inside the window";
  }
}

TEST(SlidingWindow, BadGeometryIsRefused) {
  KvCacheConfig kc;
  kc.geometry = KvGeometry{2, 1, 1, 4};
  kc.geometry.layer_window = {4};  // one entry for two layers
  EXPECT_FALSE(KvCache::create(kc).is_ok());
  kc.geometry.layer_window = {4, -1};
  EXPECT_FALSE(KvCache::create(kc).is_ok());
}

}  // namespace
}  // namespace vlkv
