// KvCache::store_without_attention (the benchmark fill's store path): the same rows,
// segments and pages as attend() with the same K/V, for every registered method that
// needs no attention statistics; Unsupported (sequence unchanged) for those that do;
// bad calls are InvalidArgument.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/method_registry.h"

namespace vlkv {
namespace {

constexpr KvGeometry kGeo{2, 4, 2, 32};

std::unique_ptr<KvCache> make_cache(const std::string& method) {
  KvCacheConfig c;
  c.geometry = kGeo;
  c.method = method;
  c.page_bytes = 4096;
  c.budget_bytes = 64 << 20;
  Result<std::unique_ptr<KvCache>> kv = KvCache::create(c);
  EXPECT_TRUE(kv.is_ok()) << method << ": " << kv.status().message();
  return kv.is_ok() ? std::move(kv).value() : nullptr;
}

bool needs_statistics(const std::string& method) {
  Result<std::unique_ptr<Method>> m = create_method(method, kGeo);
  if (!m.is_ok()) return false;
  const SequencePolicy* policy = (*m)->sequence_policy();
  const std::unique_ptr<LayerState> fresh = policy ? policy->new_sequence_state() : nullptr;  // a new sequence's prompt step
  for (int l = 0; l < kGeo.n_layers; ++l)
    if ((*m)->layer_plan(l).stats != kStatNone || plan_for_step(**m, l, fresh.get(), 50).stats != kStatNone) return true;
  return false;
}

// Steps of 50, 1 and 70 tokens (a window fold and a decode step), half visual. Methods
// that need attention statistics get them from the same queries (probe rows only).
TEST(StoreWithoutAttention, SameStoredRowsAndPagesAsAttend) {
  ThreadPool pool(1);
  std::vector<std::string> specs;  // every method's defaults, and Q Cache with a lazy layer
  for (const MethodInfo* info : list_methods()) specs.push_back(info->name);
  for (const char* q : {"qcache_gla:lazy=1", "qcache_vla:lazy=1", "qcache_gla:n_lazy=1+kivi2", "qcache_vla:n_lazy=1"})
    specs.push_back(q);
  for (const std::string& spec : specs) {
    auto attended = make_cache(spec), stored = make_cache(spec);
    ASSERT_TRUE(attended && stored);
    const SeqId a = attended->add_sequence().value(), s = stored->add_sequence().value();
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int n : {50, 1, 70}) {
      std::vector<TokenKind> kinds(n);
      for (int i = 0; i < n; ++i) kinds[i] = i % 2 ? TokenKind::kVisual : TokenKind::kText;
      for (int l = 0; l < kGeo.n_layers; ++l) {
        std::vector<float> k(static_cast<size_t>(n) * kGeo.n_kv_heads * kGeo.head_dim), v(k.size());
        std::vector<float> q(static_cast<size_t>(n) * kGeo.n_heads * kGeo.head_dim), out(q.size());
        for (auto* x : {&k, &v, &q})
          for (float& f : *x) f = nd(rng);
        ASSERT_TRUE(attended->attend(a, l, q.data(), k.data(), v.data(), kinds.data(), n, 0.17f, out.data(), pool).is_ok());
        Status st = stored->store_without_attention(s, l, k.data(), v.data(), kinds.data(), n, q.data(), 0.17f, &pool);
        ASSERT_TRUE(st.is_ok()) << spec << ": " << st.message();
      }
      attended->commit(a, n);
      stored->commit(s, n);
    }
    EXPECT_EQ(stored->n_tokens(s), 121);
    EXPECT_EQ(stored->bytes_in_use(), attended->bytes_in_use()) << spec;
    for (int l = 0; l < kGeo.n_layers; ++l)
      for (int h = 0; h < kGeo.n_kv_heads; ++h) {
        std::vector<float> ka, va, ks, vs;
        ASSERT_TRUE(attended->read_back(a, l, h, &ka, &va).is_ok());
        ASSERT_TRUE(stored->read_back(s, l, h, &ks, &vs).is_ok());
        EXPECT_EQ(ka, ks) << spec << " layer " << l << " head " << h;  // same store path: bit for bit
        EXPECT_EQ(va, vs) << spec << " layer " << l << " head " << h;
      }
  }
}

TEST(StoreWithoutAttention, MethodsNeedingStatisticsAreUnsupportedWithoutQueries) {
  std::vector<float> k(8 * kGeo.n_kv_heads * kGeo.head_dim, 0.5f);
  std::vector<TokenKind> kinds(8, TokenKind::kText);
  for (const MethodInfo* info : list_methods()) {
    if (!needs_statistics(info->name)) continue;
    std::printf("[ %s ] needs attention statistics\n", info->name.c_str());
    auto kv = make_cache(info->name);
    ASSERT_TRUE(kv);
    const SeqId s = kv->add_sequence().value();
    Status st = Status::ok();
    for (int l = 0; l < kGeo.n_layers && st.is_ok(); ++l)
      st = kv->store_without_attention(s, l, k.data(), k.data(), kinds.data(), 8);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << info->name;
    kv->rollback(s);
    EXPECT_EQ(kv->n_tokens(s), 0);
    EXPECT_EQ(kv->layer_tokens(s, 0), 0);
  }
}

TEST(StoreWithoutAttention, BadCallsAreInvalidArgument) {
  auto kv = make_cache("f16");
  ASSERT_TRUE(kv);
  const SeqId s = kv->add_sequence().value();
  std::vector<float> k(4 * kGeo.n_kv_heads * kGeo.head_dim, 1.0f);
  std::vector<TokenKind> kinds(4, TokenKind::kText);
  EXPECT_EQ(kv->store_without_attention(s, 0, k.data(), k.data(), nullptr, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kv->store_without_attention(s, 2, k.data(), k.data(), kinds.data(), 4).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(kv->store_without_attention(s, 0, k.data(), k.data(), kinds.data(), 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(kv->store_without_attention(s + 7, 0, k.data(), k.data(), kinds.data(), 4).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(kv->store_without_attention(s, 0, k.data(), k.data(), kinds.data(), 4).is_ok());
  EXPECT_EQ(kv->store_without_attention(s, 0, k.data(), k.data(), kinds.data(), 4).code(),
            StatusCode::kInvalidArgument);  // the same layer twice in one step
  kv->rollback(s);
  EXPECT_EQ(kv->layer_tokens(s, 0), 0);
}

}  // namespace
}  // namespace vlkv
