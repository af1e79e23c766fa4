// Page tails: at the default page size, the pages a sequence holds stay within 1.1x of
// the exact codec bytes it stores (windows included) already at 1K tokens, for every
// registered method, on the benchmark model's geometry (4 layers, 16 heads, 4 kv heads,
// head_dim 128) with a VLM-like prompt (64 text, 576 visual, then text tokens). Several
// sequences of different methods share one pool and its accounting stays exact: the
// pages of all sequences sum to the pool's bytes in use and return to zero.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/method_registry.h"

namespace vlkv {
namespace {

constexpr KvGeometry kGeo{4, 16, 4, 128};

std::vector<std::string> method_names() {
  std::vector<std::string> out;
  for (const MethodInfo* m : list_methods()) out.push_back(m->name);
  return out;
}

// Stores n tokens in steps of `chunk` through the method's store path (queries for the
// methods that need attention statistics).
void fill(KvCache& kv, SeqId s, int n, int chunk, uint32_t seed, ThreadPool& pool) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  int done = 0;
  while (done < n) {
    const int m = std::min(chunk, n - done);
    std::vector<float> k(static_cast<size_t>(m) * kGeo.n_kv_heads * kGeo.head_dim), v(k.size());
    std::vector<float> q(static_cast<size_t>(m) * kGeo.n_heads * kGeo.head_dim);
    std::vector<TokenKind> kinds(m);
    for (int i = 0; i < m; ++i) kinds[i] = done + i >= 64 && done + i < 640 ? TokenKind::kVisual : TokenKind::kText;
    for (int l = 0; l < kGeo.n_layers; ++l) {
      for (auto* b : {&k, &v, &q})
        for (auto& x : *b) x = dist(rng);
      ASSERT_TRUE(kv.store_without_attention(s, l, k.data(), v.data(), kinds.data(), m, q.data(), 0.088f, &pool).is_ok());
    }
    kv.commit(s, m);
    done += m;
  }
}

class PageTails : public testing::TestWithParam<std::string> {};

TEST_P(PageTails, HeldWithinTenPercentOfStoredAt1K) {
  ThreadPool pool(2);
  KvCacheConfig c;  // the default page size
  c.geometry = kGeo;
  c.method = GetParam();
  c.budget_bytes = 256ull << 20;
  auto kv = KvCache::create(c);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  const SeqId s = (*kv)->add_sequence().value();
  fill(**kv, s, 1024, 512, 3, pool);
  const double held = static_cast<double>((*kv)->sequence_bytes(s));
  const double stored = (*kv)->stored_bytes(s);
  std::printf("[ %s ] 1K tokens, %u-byte pages: held %.0f B, stored %.0f B, ratio %.3f\n", GetParam().c_str(),
              (*kv)->page_bytes(), held, stored, held / stored);
  EXPECT_LE(held, 1.1 * stored);
  EXPECT_GE(held, stored);
  // The scheduler's reservation is an upper bound of what the sequence holds.
  EXPECT_GE(static_cast<double>((*kv)->max_bytes_for_tokens(1024).value()), held);
  (*kv)->remove_sequence(s);
  EXPECT_EQ((*kv)->bytes_in_use(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Registered, PageTails, testing::ValuesIn(method_names()),
                         [](const auto& info) { return info.param; });

// Every method in one pool, one sequence each: each keeps its own method, the pages of
// all sequences sum to the pool's bytes in use, and they return to zero.
TEST(PerSequenceMethods, OnePoolExactAccounting) {
  ThreadPool pool(2);
  KvCacheConfig c;
  c.geometry = kGeo;
  c.method = "f16";
  c.budget_bytes = 512ull << 20;
  auto kv = KvCache::create(c);
  ASSERT_TRUE(kv.is_ok());
  std::vector<SeqId> seqs;
  const std::vector<std::string> names = method_names();
  for (size_t i = 0; i < names.size(); ++i) {
    auto s = (*kv)->add_sequence(names[i]);
    ASSERT_TRUE(s.is_ok()) << names[i] << ": " << s.status().message();
    seqs.push_back(*s);
    fill(**kv, *s, 300 + 17 * static_cast<int>(i), 128, static_cast<uint32_t>(i), pool);
    uint64_t sum = 0;
    for (SeqId t : seqs) sum += (*kv)->sequence_bytes(t);
    EXPECT_EQ(sum, (*kv)->bytes_in_use());
  }
  for (size_t i = 0; i < names.size(); ++i) {
    auto m = create_method(names[i], kGeo);
    ASSERT_TRUE(m.is_ok());
    EXPECT_EQ((*kv)->sequence_method(seqs[i]), (*m)->spec());
    EXPECT_EQ((*kv)->n_tokens(seqs[i]), 300 + 17 * static_cast<int>(i));
  }
  EXPECT_EQ((*kv)->add_sequence("nosuch").status().code(), StatusCode::kInvalidArgument);
  for (SeqId s : seqs) (*kv)->remove_sequence(s);
  EXPECT_EQ((*kv)->bytes_in_use(), 0u);
}

}  // namespace
}  // namespace vlkv
