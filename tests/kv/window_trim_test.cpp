// Sliding-window layers free the pages of tokens that left their window (window_trim.h),
// under every registered KV method: the same steps run on a cache that frees and on one
// that keeps every token (KvCacheConfig::free_out_of_window = false). Checked: attention
// outputs are bit-identical (the same blocks are read; methods whose decisions read probe
// statistics are compared within the stored-rows tolerance instead, since freed keys leave
// the statistics), the bytes held stop growing once the sequence is past the window, the
// pool gets the pages back (bytes_in_use, removal to 0), admission's bound holds, and two
// interleaved sequences give exactly what each gives alone (pages are per stream).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

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

KvGeometry geometry(std::vector<int32_t> windows) {
  KvGeometry g{static_cast<int>(windows.size()), 4, 2, 64};
  g.layer_window = std::move(windows);
  return g;
}

std::unique_ptr<KvCache> cache_for(const std::string& method, const KvGeometry& g, bool free_pages) {
  KvCacheConfig kc;
  kc.geometry = g;
  kc.method = method;
  kc.page_bytes = 1024;  // small pages: many are freed and page boundaries fall inside blocks
  kc.budget_bytes = 64ull << 20;
  kc.free_out_of_window = free_pages;
  auto c = KvCache::create(kc);
  EXPECT_TRUE(c.is_ok()) << method << ": " << c.status().message();
  return c.is_ok() ? std::move(*c) : nullptr;
}

// Whether the method's storage decisions read attention statistics (they then see only the
// keys still held, so its later storage may differ from a cache that keeps everything).
bool reads_stats(const std::string& method, const KvGeometry& g) {
  auto m = create_method(method, g);
  if (!m.is_ok()) return true;
  for (int l = 0; l < g.n_layers; ++l)
    if ((*m)->layer_plan(l).stats != kStatNone) return true;
  return false;
}

// Outputs of the two caches attend the same keys, grouped into other chunks where pages were
// freed. f32 online-softmax sums: 1e-5 (outputs are O(1), ~100 ulp). Codecs that round the
// query or the probabilities per chunk (fused rounding) round differently per grouping: the
// bound method_conformance_test / sliding_window_test derive for that rounding.
double regroup_tolerance(const std::string& method, const KvGeometry& g) {
  auto m = create_method(method, g);
  if (!m.is_ok()) return 1e-5;
  int bits = 0;
  for (const Codec* c : (*m)->codecs()) {
    const Codec::FusedRounding r = c->fused_rounding(g.head_dim);
    for (int b : {r.query_bits, r.prob_bits})
      if (b > 0 && (bits == 0 || b < bits)) bits = b;
  }
  if (bits == 0) return 1e-5;
  return bits >= 14 ? 1e-4 + 160.0 * std::ldexp(1.0, -bits) : 0.75;
}

// One step of n_new tokens on every layer of seq (inputs from seed); outputs appended to out.
void run_step(KvCache& cache, const KvGeometry& g, SeqId seq, int n_new, bool non_causal, uint32_t seed,
              ThreadPool& pool, std::vector<float>* out) {
  const int d = g.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int l = 0; l < g.n_layers; ++l) {
    auto q = random_vec(static_cast<size_t>(n_new) * g.n_heads * d, seed + 3 * l, -2.0f, 2.0f);
    auto k = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, seed + 3 * l + 1, -2.0f, 2.0f);
    auto v = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, seed + 3 * l + 2, -1.0f, 1.0f);
    std::vector<TokenKind> kinds(n_new, non_causal ? TokenKind::kVisual : TokenKind::kText);
    std::vector<float> o(q.size());
    Status st = cache.attend(seq, l, q.data(), k.data(), v.data(), kinds.data(), n_new, scale, o.data(), pool, nullptr,
                             non_causal);
    ASSERT_TRUE(st.is_ok()) << st.message();
    out->insert(out->end(), o.begin(), o.end());
  }
  cache.commit(seq, n_new);
}

// The steps of a long sequence: a prompt longer than the window, an image chunk, then decode.
struct Step {
  int n_new;
  bool non_causal;
};
std::vector<Step> long_sequence(int n_decode) {
  std::vector<Step> s = {{37, false}, {16, true}, {9, false}};
  for (int i = 0; i < n_decode; ++i) s.push_back({1, false});
  return s;
}

class EveryMethodTrimmed : public ::testing::TestWithParam<std::string> {};

// Same steps on a freeing and a keeping cache; outputs equal, held bytes bounded and below.
TEST_P(EveryMethodTrimmed, SameAttentionBoundedBytes) {
  ThreadPool pool(2);
  const KvGeometry g = geometry({kWindow, kWindow, 0});  // two sliding layers, one global
  auto freeing = cache_for(GetParam(), g, true), keeping = cache_for(GetParam(), g, false);
  ASSERT_TRUE(freeing && keeping);
  auto sf = freeing->add_sequence(), sk = keeping->add_sequence();
  ASSERT_TRUE(sf.is_ok() && sk.is_ok());
  const bool exact = !reads_stats(GetParam(), g);
  // A sliding-only twin measures what the sliding layers hold (the global one grows).
  const KvGeometry gs = geometry({kWindow, kWindow});
  auto sliding = cache_for(GetParam(), gs, true);
  ASSERT_TRUE(sliding);
  auto ss = sliding->add_sequence();
  ASSERT_TRUE(ss.is_ok());
  uint64_t held_mid = 0, held_late = 0;  // most held by the sliding-only cache over steps [100, 250), [250, end)
  uint32_t seed = 5;
  double worst = 0;
  const double tol = regroup_tolerance(GetParam(), g);
  for (const Step& st : long_sequence(400)) {
    std::vector<float> of, ok, os;
    run_step(*freeing, g, *sf, st.n_new, st.non_causal, seed, pool, &of);
    run_step(*keeping, g, *sk, st.n_new, st.non_causal, seed, pool, &ok);
    run_step(*sliding, gs, *ss, st.n_new, st.non_causal, seed, pool, &os);
    seed += 101;
    if (HasFailure()) return;
    ASSERT_EQ(of.size(), ok.size());
    // The same keys are attended (regroup_tolerance). Methods reading statistics see no
    // freed keys in them; here they store the same and stay within the same bound.
    for (size_t i = 0; i < of.size(); ++i) {
      ASSERT_TRUE(std::isfinite(of[i]));
      worst = std::max(worst, static_cast<double>(std::fabs(of[i] - ok[i])));
    }
    ASSERT_LE(worst, tol) << GetParam() << ": attention differs (max abs " << worst << ") from the keeping cache at token "
                           << freeing->n_tokens(*sf);
    const int64_t n = freeing->n_tokens(*sf);
    // The pool holds exactly the sequences' pages; the freeing cache holds no more than the keeping one.
    EXPECT_EQ(freeing->bytes_in_use(), freeing->sequence_bytes(*sf));
    EXPECT_LE(freeing->sequence_bytes(*sf), keeping->sequence_bytes(*sk));
    EXPECT_LE(freeing->stored_bytes(*sf), keeping->stored_bytes(*sk));
    // Admission's reservation covers what the sequences really hold.
    auto bound = freeing->max_bytes_for_tokens(n);
    ASSERT_TRUE(bound.is_ok());
    EXPECT_LE(freeing->sequence_bytes(*sf), *bound) << "at " << n << " tokens";
    auto bound_s = sliding->max_bytes_for_tokens(n);
    ASSERT_TRUE(bound_s.is_ok());
    EXPECT_LE(sliding->sequence_bytes(*ss), *bound_s) << "sliding-only, at " << n << " tokens";
    if (n >= 100 && n < 250) held_mid = std::max(held_mid, sliding->sequence_bytes(*ss));
    if (n >= 250) held_late = std::max(held_late, sliding->sequence_bytes(*ss));
  }
  // Past the window the sliding layers hold a bounded amount: no growth from 250 to 462 tokens.
  EXPECT_GT(held_mid, 0u);
  // Slack: one page per stream (a page's tokens leave the window together, at varying phases).
  auto m = create_method(GetParam(), gs);
  ASSERT_TRUE(m.is_ok());
  const uint64_t slack = static_cast<uint64_t>(gs.n_layers) * gs.n_kv_heads * (*m)->max_streams_per_head() * 1024;
  EXPECT_LE(held_late, held_mid + slack) << "held bytes keep growing on sliding layers";
  EXPECT_LT(freeing->sequence_bytes(*sf), keeping->sequence_bytes(*sk)) << "nothing was freed";
  std::printf("[ %s ] held bytes %llu (freeing) vs %llu (keeping), sliding-only %llu; %s\n", GetParam().c_str(),
              static_cast<unsigned long long>(freeing->sequence_bytes(*sf)),
              static_cast<unsigned long long>(keeping->sequence_bytes(*sk)),
              static_cast<unsigned long long>(sliding->sequence_bytes(*ss)),
              (std::string(exact ? "" : "(reads statistics) ") + "max abs output diff " + std::to_string(worst)).c_str());
  freeing->remove_sequence(*sf);
  sliding->remove_sequence(*ss);
  EXPECT_EQ(freeing->bytes_in_use(), 0u) << "pages leaked or freed twice";
  EXPECT_EQ(sliding->bytes_in_use(), 0u);
}

// Two sequences interleaved in one freeing cache (different lengths, so they leave the
// window at different pages) give exactly what each gives alone.
TEST_P(EveryMethodTrimmed, InterleavedSequencesDoNotCorruptEachOther) {
  ThreadPool pool(2);
  const KvGeometry g = geometry({kWindow, 0});
  auto shared = cache_for(GetParam(), g, true), alone_a = cache_for(GetParam(), g, true),
       alone_b = cache_for(GetParam(), g, true);
  ASSERT_TRUE(shared && alone_a && alone_b);
  auto a = shared->add_sequence(), b = shared->add_sequence(), a1 = alone_a->add_sequence(),
       b1 = alone_b->add_sequence();
  ASSERT_TRUE(a.is_ok() && b.is_ok() && a1.is_ok() && b1.is_ok());
  std::vector<Step> sa = long_sequence(120), sb = {{13, false}};
  for (int i = 0; i < 150; ++i) sb.push_back({1, false});
  for (size_t i = 0; i < std::max(sa.size(), sb.size()); ++i) {
    for (int which = 0; which < 2; ++which) {
      const std::vector<Step>& steps = which ? sb : sa;
      if (i >= steps.size()) continue;
      const uint32_t seed = 7 + 977 * static_cast<uint32_t>(i) + 31 * which;
      std::vector<float> o_shared, o_alone;
      run_step(*shared, g, which ? *b : *a, steps[i].n_new, steps[i].non_causal, seed, pool, &o_shared);
      run_step(which ? *alone_b : *alone_a, g, which ? *b1 : *a1, steps[i].n_new, steps[i].non_causal, seed, pool,
               &o_alone);
      if (HasFailure()) return;
      ASSERT_EQ(0, std::memcmp(o_shared.data(), o_alone.data(), sizeof(float) * o_shared.size()))
          << GetParam() << ": sequence " << which << " differs at step " << i;
    }
  }
  EXPECT_EQ(shared->bytes_in_use(), shared->sequence_bytes(*a) + shared->sequence_bytes(*b));
  shared->remove_sequence(*a);
  EXPECT_EQ(shared->bytes_in_use(), shared->sequence_bytes(*b));
}

INSTANTIATE_TEST_SUITE_P(Registered, EveryMethodTrimmed, ::testing::ValuesIn(method_names()), [](const auto& info) {
  std::string name = info.param;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
});

// A rolled-back step restores the pages it freed: the next steps match a cache that never
// took the failed step.
TEST(WindowTrim, RollbackRestoresFreedPages) {
  ThreadPool pool(1);
  const KvGeometry g = geometry({kWindow});
  auto c1 = cache_for("f16", g, true), c2 = cache_for("f16", g, true);
  ASSERT_TRUE(c1 && c2);
  auto s1 = c1->add_sequence(), s2 = c2->add_sequence();
  ASSERT_TRUE(s1.is_ok() && s2.is_ok());
  std::vector<float> o1, o2;
  run_step(*c1, g, *s1, 60, false, 3, pool, &o1);
  run_step(*c2, g, *s2, 60, false, 3, pool, &o2);
  const uint64_t before = c1->sequence_bytes(*s1);
  {  // a 40-token step, attended (pages freed) and rolled back
    const int n = 40, d = g.head_dim;
    auto q = random_vec(static_cast<size_t>(n) * g.n_heads * d, 99), k = random_vec(static_cast<size_t>(n) * 2 * d, 98);
    std::vector<float> o(q.size());
    ASSERT_TRUE(c1->attend(*s1, 0, q.data(), k.data(), k.data(), nullptr, n, 0.125f, o.data(), pool).is_ok());
    c1->rollback(*s1);
  }
  EXPECT_EQ(c1->sequence_bytes(*s1), before);
  EXPECT_EQ(c1->bytes_in_use(), before);
  for (int i = 0; i < 30; ++i) {
    o1.clear();
    o2.clear();
    run_step(*c1, g, *s1, 1, false, 500 + i, pool, &o1);
    run_step(*c2, g, *s2, 1, false, 500 + i, pool, &o2);
    ASSERT_EQ(0, std::memcmp(o1.data(), o2.data(), sizeof(float) * o1.size())) << "step " << i;
  }
}

}  // namespace
}  // namespace vlkv
