// Every registered KV method through the same checks: stored values within the
// method's declared round-trip bound, attention against a double reference over
// what is stored, byte accounting (sequences == pool, vs the method's report),
// thousands of decode steps across page boundaries, copy / remove of sequences.
#include <gtest/gtest.h>

#include <cmath>

#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

constexpr KvGeometry kGeom{2, 4, 2, 64};

class EveryMethod : public ::testing::TestWithParam<std::string> {};

// Attends n_new tokens on every layer; history gets the exact inputs. Checks the
// output against a double reference over read_back() rows when `check`.
void step(KvCache& cache, SeqId seq, std::vector<std::vector<float>>& hk, std::vector<std::vector<float>>& hv,
          int n_new, uint32_t seed, ThreadPool& pool, bool check, std::vector<float>* outs = nullptr) {
  const KvGeometry& g = kGeom;
  const int d = g.head_dim, group = g.n_heads / g.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t n_cached = cache.n_tokens(seq);
  for (int l = 0; l < g.n_layers; ++l) {
    auto q = random_vec(static_cast<size_t>(n_new) * g.n_heads * d, seed + 3 * l, -2.0f, 2.0f);
    auto k = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, seed + 3 * l + 1, -2.0f, 2.0f);
    auto v = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, seed + 3 * l + 2, -1.0f, 1.0f);
    std::vector<std::vector<float>> sk(g.n_kv_heads), sv(g.n_kv_heads);
    if (check) {
      for (int h = 0; h < g.n_kv_heads; ++h) ASSERT_TRUE(cache.read_back(seq, l, h, &sk[h], &sv[h]).is_ok());
    }
    std::vector<float> out(q.size());
    std::vector<TokenKind> kinds(n_new, TokenKind::kVisual);
    Status st = cache.attend(seq, l, q.data(), k.data(), v.data(), kinds.data(), n_new, scale, out.data(), pool);
    ASSERT_TRUE(st.is_ok()) << st.message();
    hk[l].insert(hk[l].end(), k.begin(), k.end());
    hv[l].insert(hv[l].end(), v.begin(), v.end());
    if (outs) outs->insert(outs->end(), out.begin(), out.end());
    if (!check) continue;
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
      for (int i = 0; i < n_new; ++i)
        for (int hh = 0; hh < group; ++hh) {
          const size_t row = (static_cast<size_t>(i) * g.n_heads + h * group + hh) * d;
          kvtest::ref_attention_row(&q[row], keys.data(), vals.data(), n_cached + i + 1, d, scale, ref.data());
          ASSERT_LT(kvtest::rel_err(&out[row], ref.data(), d), 1e-4) << "layer " << l << " token " << i;
        }
    }
  }
  cache.commit(seq, n_new);
}

// Stored rows vs the exact history, within the method's declared bound.
// (Current methods keep tokens in storage order; a reordering method must extend this.)
void check_round_trip(const KvCache& cache, SeqId seq, const std::vector<std::vector<float>>& hk,
                      const std::vector<std::vector<float>>& hv, double bound) {
  const KvGeometry& g = kGeom;
  const int d = g.head_dim;
  for (int l = 0; l < g.n_layers; ++l)
    for (int h = 0; h < g.n_kv_heads; ++h) {
      std::vector<float> k, v;
      ASSERT_TRUE(cache.read_back(seq, l, h, &k, &v).is_ok());
      ASSERT_EQ(static_cast<int64_t>(k.size()), cache.n_tokens(seq) * d);
      for (int64_t t = 0; t < cache.n_tokens(seq); ++t) {
        const size_t src = (t * g.n_kv_heads + h) * d;
        double mk = 0, mv = 0;
        for (int i = 0; i < d; ++i) {
          mk = std::max(mk, static_cast<double>(std::abs(hk[l][src + i])));
          mv = std::max(mv, static_cast<double>(std::abs(hv[l][src + i])));
        }
        for (int i = 0; i < d; ++i) {
          ASSERT_LE(std::abs(k[t * d + i] - hk[l][src + i]), bound * mk + 0x1p-24) << "K l" << l << " t" << t;
          ASSERT_LE(std::abs(v[t * d + i] - hv[l][src + i]), bound * mv + 0x1p-24) << "V l" << l << " t" << t;
        }
      }
    }
}

TEST_P(EveryMethod, ThousandsOfDecodeStepsCopyRemove) {
  ThreadPool pool(2);
  KvCacheConfig kc;
  kc.geometry = kGeom;
  kc.method = GetParam();
  kc.page_bytes = 4096;
  kc.budget_bytes = 256 << 20;
  auto created = KvCache::create(kc);
  ASSERT_TRUE(created.is_ok()) << created.status().message();
  KvCache& cache = **created;
  const SeqId a = cache.add_sequence().value();
  std::vector<std::vector<float>> hk(kGeom.n_layers), hv(kGeom.n_layers);
  step(cache, a, hk, hv, 40, 1, pool, true);
  for (int s = 0; s < 2000; ++s) {
    step(cache, a, hk, hv, 1, 100 + s, pool, s % 250 == 0);
    ASSERT_EQ(cache.sequence_bytes(a), cache.bytes_in_use());
  }
  check_round_trip(cache, a, hk, hv, 0.0 + [&] {
    auto m = create_method(GetParam(), kGeom);
    return m.is_ok() ? (*m)->error_bound() : 1.0;
  }());
  // The method's bytes/token report vs pages held: only page tails (one per stream) differ.
  const double reported = cache.bytes_per_token() * static_cast<double>(cache.n_tokens(a));
  const double slack = 2.0 * kGeom.n_layers * kGeom.n_kv_heads * kc.page_bytes;
  EXPECT_GE(static_cast<double>(cache.bytes_in_use()), reported);
  EXPECT_LE(static_cast<double>(cache.bytes_in_use()), reported + slack);
  EXPECT_GT(cache.bits_per_element(), 0.0);

  // Copy: b continues exactly like a.
  const SeqId b = cache.add_sequence().value();
  ASSERT_TRUE(cache.copy_sequence(a, b).is_ok());
  EXPECT_EQ(cache.n_tokens(b), cache.n_tokens(a));
  EXPECT_EQ(cache.sequence_bytes(b), cache.sequence_bytes(a));
  EXPECT_EQ(cache.bytes_in_use(), 2 * cache.sequence_bytes(a));
  auto hk_b = hk, hv_b = hv;
  std::vector<float> out_a, out_b;
  for (int s = 0; s < 20; ++s) {
    step(cache, a, hk, hv, 1, 9000 + s, pool, false, &out_a);
    step(cache, b, hk_b, hv_b, 1, 9000 + s, pool, s == 19, &out_b);
  }
  EXPECT_EQ(out_a, out_b);
  cache.remove_sequence(a);
  EXPECT_EQ(cache.bytes_in_use(), cache.sequence_bytes(b));
  check_round_trip(cache, b, hk_b, hv_b, 1.0);
  cache.remove_sequence(b);
  EXPECT_EQ(cache.bytes_in_use(), 0u);
}

TEST_P(EveryMethod, TooSmallBudgetIsOutOfMemoryAndSequenceUnchanged) {
  ThreadPool pool(1);
  KvCacheConfig kc;
  kc.geometry = kGeom;
  kc.method = GetParam();
  kc.page_bytes = 4096;
  kc.budget_bytes = 64 * 4096;
  auto created = KvCache::create(kc);
  ASSERT_TRUE(created.is_ok());
  KvCache& cache = **created;
  const SeqId a = cache.add_sequence().value();
  std::vector<std::vector<float>> hk(kGeom.n_layers), hv(kGeom.n_layers);
  step(cache, a, hk, hv, 8, 1, pool, false);
  const uint64_t bytes = cache.bytes_in_use();
  auto q = random_vec(4000 * kGeom.n_heads * kGeom.head_dim, 5);
  auto kv = random_vec(4000 * kGeom.n_kv_heads * kGeom.head_dim, 6);
  std::vector<float> out(q.size());
  Status st = cache.attend(a, 0, q.data(), kv.data(), kv.data(), nullptr, 4000, 0.125f, out.data(), pool);
  ASSERT_EQ(st.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(st.message().find("exhausted at token"), std::string::npos) << st.message();
  EXPECT_EQ(cache.n_tokens(a), 8);
  EXPECT_EQ(cache.bytes_in_use(), bytes);
  check_round_trip(cache, a, hk, hv, 1.0);
  step(cache, a, hk, hv, 1, 2, pool, true);  // still usable
}

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (const MethodInfo* m : list_methods()) out.push_back(m->name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registered, EveryMethod, ::testing::ValuesIn(method_names()),
                         [](const auto& info) { return info.param; });

TEST(MethodRegistry, ListsBaselinesAndDescribesThem) {
  const auto names = method_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "f32"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "f16"), names.end());
  EXPECT_NE(describe_methods().find("f16: "), std::string::npos);
  auto m = create_method("f16:bits=3", kGeom);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().message(), "'f16' has no parameter 'bits'; valid parameters: (none)");
}

}  // namespace
}  // namespace vlkv
