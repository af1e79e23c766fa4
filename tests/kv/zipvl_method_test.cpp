// ZipVL's paper logic: the adaptive ratio on hand-made distributions, the causal
// normalization and re-scoring of decode tokens (mass accumulated over steps, divided by
// the probes that saw each token), the sparse-attention key choice, and the cache end to
// end (a peaked prompt keeps few tokens at high bits; sparse prefill stays close to full).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kv/kv_cache.h"
#include "kv/layer_editor.h"
#include "kv/method_registry.h"
#include "kv/methods/zipvl/zipvl_ratio.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

std::vector<uint8_t> flags_of(const std::vector<float>& s, double tau) {
  std::vector<uint8_t> f(s.size());
  zipvl::important_by_mass(s.data(), static_cast<int64_t>(s.size()), tau, f.data());
  return f;
}

TEST(ZipvlRatio, SmallestSetHoldingTauOfTheMass) {
  const std::vector<float> s = {0.05f, 0.5f, 0.1f, 0.3f, 0.05f};
  EXPECT_EQ(flags_of(s, 0.75), (std::vector<uint8_t>{0, 1, 0, 1, 0}));  // 0.5 + 0.3 >= 0.75
  EXPECT_EQ(flags_of(s, 0.85), (std::vector<uint8_t>{0, 1, 1, 1, 0}));
  EXPECT_EQ(flags_of(s, 0.97), (std::vector<uint8_t>{1, 1, 1, 1, 1}));  // 0.95 < 0.97: ties, earlier first, then all
  EXPECT_EQ(flags_of(s, 0.92), (std::vector<uint8_t>{1, 1, 1, 1, 0}));
  // Flat attention keeps (nearly) everything, peaked attention few tokens: the ratio adapts.
  std::vector<uint8_t> f(100);
  EXPECT_EQ(zipvl::important_by_mass(std::vector<float>(10, 0.1f).data(), 10, 0.97, f.data()), 10);
  std::vector<float> peaked(100, 0.0002f);
  peaked[17] = 0.98f;
  EXPECT_EQ(zipvl::important_by_mass(peaked.data(), 100, 0.97, f.data()), 1);
  EXPECT_EQ(f[17], 1);
  // Scale does not matter (normalized scores need not sum to 1); no mass: nothing important.
  std::vector<float> scaled = s;
  for (auto& e : scaled) e *= 7.0f;
  EXPECT_EQ(flags_of(scaled, 0.85), flags_of(s, 0.85));
  EXPECT_EQ(zipvl::important_by_mass(std::vector<float>(4, 0.0f).data(), 4, 0.97, f.data()), 0);
  EXPECT_EQ(flags_of({NAN, 1.0f, -2.0f}, 0.5), (std::vector<uint8_t>{0, 1, 0}));
}

TEST(ZipvlMethod, SpecDefaultsAndBadParameters) {
  const KvGeometry g{2, 4, 2, 64};
  auto m = create_method("zipvl", g);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->spec(), "zipvl:tau=0.97,hi=4,lo=2,rescore=100,probe=0.05,seed=0,sparse=0,g=32");
  const LayerPlan p = (*m)->layer_plan(1);
  EXPECT_EQ(p.stats, kStatKeyMass);
  EXPECT_EQ(p.probe.last_frac, 0.05);
  EXPECT_EQ(p.probe.random_frac, 0.05);
  EXPECT_FALSE(p.sparse_attention);
  EXPECT_TRUE((*create_method("zipvl:sparse=1", g))->layer_plan(0).sparse_attention);
  // Worst case (every token important): 4-bit keys per channel over 32 tokens + 4-bit values
  // per token, f16 scale and min per channel / per group of 32 channels: 5 bits for both.
  EXPECT_NEAR((*m)->bits_per_element(), 5.0, 1e-9);
  EXPECT_LT((*m)->min_bytes_for_tokens(1000), (*m)->bytes_for_tokens(1000));
  for (const char* bad : {"zipvl:hi=5", "zipvl:lo=4,hi=2", "zipvl:tau=0", "zipvl:tau=1.5", "zipvl:rescore=0",
                          "zipvl:probe=0.9", "zipvl:sparse=2", "zipvl:g=12", "zipvl:window=3"}) {
    auto r = create_method(bad, g);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    const std::string key = std::string(bad).substr(6, std::string(bad).find('=') - 6);
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
}

// One layer, one kv head, stored through the method with hand-made statistics.
struct OneLayer {
  PagePool pool{16ull << 20, 4096};
  LayerCache cache;
  PendingStep pending;
  std::unique_ptr<Method> method;
  explicit OneLayer(const std::string& spec) {
    auto m = create_method(spec, KvGeometry{1, 1, 1, 16});
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    method = std::move(*m);
    cache.heads.resize(1);
    cache.state = method->new_layer_state(0);
  }
  ~OneLayer() { cache.for_each_page([&](PageId p) { pool.free(p); }); }
  // One step of n_new tokens with key_mass [n_cached + n_new] and the given probes.
  void step(int n_new, const std::vector<float>& key_mass, const std::vector<int>& probes) {
    const auto kv = random_vec(static_cast<size_t>(n_new) * 16, static_cast<uint32_t>(cache.n_tokens + 1));
    std::vector<TokenKind> kinds(n_new, TokenKind::kVisual);
    AttentionStats stats{key_mass.data(), probes.data(), static_cast<int>(probes.size())};
    StoreInput in;
    in.n_cached = cache.n_tokens;
    in.n_new = n_new;
    in.k = kv.data();
    in.v = kv.data();
    in.kinds = kinds.data();
    in.stats = &stats;
    ASSERT_EQ(static_cast<int64_t>(key_mass.size()), cache.n_tokens + n_new);
    LayerEditor ed(pool, cache, pending, 0, 16);
    ASSERT_TRUE(method->store(in, ed).is_ok());
    cache.n_tokens += n_new;
  }
  // Positions stored under each segment tag (0 hi, 1 lo, 2 window, 3 staged hi, 4 staged lo).
  std::vector<std::vector<int64_t>> by_tag() const {
    std::vector<int64_t> pos;
    EXPECT_TRUE(method->stored_positions(cache.state.get(), 0, cache.heads[0].segments, &pos));
    std::vector<std::vector<int64_t>> out(5);
    size_t i = 0;
    for (const Segment& s : cache.heads[0].segments)
      for (int64_t t = 0; t < s.n_tokens; ++t) out[s.tag].push_back(pos[i++]);
    EXPECT_EQ(i, pos.size());
    for (auto& v : out) std::sort(v.begin(), v.end());
    return out;
  }
};

// Decode tokens wait in the window; at `rescore` tokens each is scored by the mass the
// decode probes put on it divided by the number of probes that saw it (token 0: 4 probes,
// token 3: 1). Normalized scores 0.8875, 0.0833, 0.075, 0.05: tau 0.9 keeps tokens 0-2
// (raw sums 3.55, 0.25, 0.15, 0.05 would keep only 0 and 1).
TEST(ZipvlMethod, DecodeTokensRescoredByCausallyNormalizedMass) {
  OneLayer L("zipvl:tau=0.9,rescore=4,g=8");
  L.step(1, {1.0f}, {0});
  L.step(1, {0.9f, 0.1f}, {0});
  L.step(1, {0.8f, 0.1f, 0.1f}, {0});
  auto tags = L.by_tag();
  EXPECT_EQ(tags[2], (std::vector<int64_t>{0, 1, 2}));  // still in the f16 window
  L.step(1, {0.85f, 0.05f, 0.05f, 0.05f}, {0});
  tags = L.by_tag();
  EXPECT_TRUE(tags[2].empty());
  EXPECT_EQ(tags[3], (std::vector<int64_t>{0, 1, 2}));  // important, staged until a group of 8
  EXPECT_EQ(tags[4], (std::vector<int64_t>{3}));
}

// A prefill step splits its tokens by their (already normalized) probe scores; per-channel
// keys need whole groups of g = 8: 8 important tokens reach the hi segment, the 9th and
// the other class's remainder wait staged in f16.
TEST(ZipvlMethod, PrefillSplitsByNormalizedProbeMassAndFillsGroups) {
  OneLayer L("zipvl:tau=0.9,rescore=4,g=8");
  std::vector<float> mass(20, 0.001f);
  for (int t : {1, 3, 4, 6, 8, 9, 11, 13, 15}) mass[t] = 0.1f;
  L.step(20, mass, {18, 19});
  auto tags = L.by_tag();
  // 9 heavy tokens hold 0.9 / (0.9 + 0.011) of the mass: the first 8 (ties: earlier first)
  // fill a group of the hi segment, the 9th waits staged.
  EXPECT_EQ(tags[0], (std::vector<int64_t>{1, 3, 4, 6, 8, 9, 11, 13}));
  EXPECT_EQ(tags[3], (std::vector<int64_t>{15}));
  EXPECT_EQ(tags[1].size() + tags[4].size(), 11u);
  EXPECT_EQ(tags[1].size() % 8, 0u);
}

TEST(ZipvlMethod, SparseKeysFollowTheTauRulePerHeadOnlyForLongSteps) {
  const KvGeometry g{1, 4, 2, 16};
  auto m = create_method("zipvl:sparse=1,tau=0.8", g);
  ASSERT_TRUE(m.is_ok());
  const int n_cached = 10, n_new = 70, n_keys = n_cached + n_new;
  std::vector<float> mass(2 * n_keys, 0.0f);
  mass[3] = 0.5f;           // head 0: a cached key and a new one
  mass[n_cached + 5] = 0.4f;
  mass[n_keys + 60] = 1.0f;  // head 1: one new key
  std::vector<int> probes = {69};
  AttentionStats stats{mass.data(), probes.data(), 1};
  StoreInput in;
  in.n_cached = n_cached;
  in.n_new = n_new;
  in.stats = &stats;
  std::vector<uint8_t> keep;
  ASSERT_TRUE((*m)->key_selector()->select_attended_keys(in, &keep));
  ASSERT_EQ(keep.size(), mass.size());
  for (int t = 0; t < 2 * n_keys; ++t) EXPECT_EQ(keep[t], t == 3 || t == n_cached + 5 || t == n_keys + 60) << t;
  in.n_new = 63;  // short steps attend everything
  EXPECT_FALSE((*m)->key_selector()->select_attended_keys(in, &keep));
}

// Keys aligned with the queries on a few "heavy" tokens: the probe mass is peaked.
void peaked_step(const KvGeometry& g, int n, uint32_t seed, std::vector<float>& q, std::vector<float>& k,
                 std::vector<float>& v) {
  const int d = g.head_dim;
  q = random_vec(static_cast<size_t>(n) * g.n_heads * d, seed, -0.3f, 0.3f);
  k = random_vec(static_cast<size_t>(n) * g.n_kv_heads * d, seed + 1, -0.3f, 0.3f);
  v = random_vec(k.size(), seed + 2, -1.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < g.n_heads; ++h) q[(static_cast<size_t>(i) * g.n_heads + h) * d] += 8.0f;
    if (i % 10 == 0)  // logit + 8 (scale 1/8): e^8 times the weight of the others
      for (int h = 0; h < g.n_kv_heads; ++h) k[(static_cast<size_t>(i) * g.n_kv_heads + h) * d] += 8.0f;
  }
}

TEST(ZipvlCache, PeakedPromptKeepsFewHighBitTokensAndSparseStaysCloseToFull) {
  const KvGeometry g{2, 4, 2, 64};
  ThreadPool pool(2);
  auto make = [&](const std::string& m) { return kvtest::small_page_cache(m, g); };
  const int n = 2000;  // pages (4 KiB, one tail per stream) small next to what is stored
  std::vector<float> q, k, v;
  peaked_step(g, n, 3, q, k, v);
  const float scale = 0.125f;
  std::vector<float> out_full(q.size()), out_sparse(q.size()), out_f32(q.size());
  auto full = make("zipvl"), sparse = make("zipvl:sparse=1"), f32 = make("f32"), hi = make("zipvl:tau=1");
  for (auto* c : {full.get(), sparse.get(), f32.get(), hi.get()}) {
    const SeqId s = c->add_sequence().value();
    std::vector<float>& out = c == sparse.get() ? out_sparse : c == f32.get() ? out_f32 : out_full;
    for (int l = 0; l < g.n_layers; ++l)
      ASSERT_TRUE(c->attend(s, l, q.data(), k.data(), v.data(), nullptr, n, scale, out.data(), pool).is_ok());
    c->commit(s, n);
  }
  // Attention over the step is exact without sparse (the new tokens are f32).
  for (size_t i = 0; i < out_full.size(); ++i) ASSERT_NEAR(out_full[i], out_f32[i], 1e-5);
  // Sparse: the heavy keys hold most of the mass; dropping the rest moves each output row
  // by a few % of its scale (measured 0.02; bound 0.15 of max |out|).
  double err = 0, mag = 0;
  for (size_t i = 0; i < out_f32.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(out_sparse[i] - out_f32[i])));
    mag = std::max(mag, static_cast<double>(std::abs(out_f32[i])));
  }
  std::printf("[ zipvl ] sparse prefill vs full on a peaked prompt: max err / max |out| = %.4g\n", err / mag);
  EXPECT_LT(err / mag, 0.15);
  EXPECT_GT(err, 0.0);  // it did attend a subset
  // Few tokens important: far fewer bytes than everything at 4 bits (tau=1), more than all 2-bit.
  auto method = create_method("zipvl", g);
  const double lo = (*method)->min_bytes_for_tokens(n);
  std::printf("[ zipvl ] peaked prompt: %.0f bytes held vs %.0f all-important (%.0f all-lo)\n",
              static_cast<double>(full->bytes_in_use()), static_cast<double>(hi->bytes_in_use()), lo);
  EXPECT_LT(full->bytes_in_use(), hi->bytes_in_use());
  EXPECT_GE(static_cast<double>(full->bytes_in_use()), lo);
}

// Flat attention (random keys, no heavy tokens): tau = 0.97 keeps nearly every key, a
// mask would skip < 15% of the work (kMaxSparseWork), so sparse=1 attends every key: the
// same output as sparse=0, over two steps (the second over a cache).
TEST(ZipvlCache, FlatPromptSparseAttendsEveryKeyAsFull) {
  const KvGeometry g{1, 4, 2, 64};
  ThreadPool pool(2);
  const int n = 300;
  const auto q = random_vec(static_cast<size_t>(n) * g.n_heads * g.head_dim, 11, -0.3f, 0.3f);
  const auto k = random_vec(static_cast<size_t>(n) * g.n_kv_heads * g.head_dim, 12, -0.3f, 0.3f);
  const auto v = random_vec(k.size(), 13, -1.0f, 1.0f);
  std::unique_ptr<KvCache> caches[2] = {kvtest::small_page_cache("zipvl", g),
                                        kvtest::small_page_cache("zipvl:sparse=1", g)};
  const SeqId seqs[2] = {caches[0]->add_sequence().value(), caches[1]->add_sequence().value()};
  std::vector<float> outs[2] = {std::vector<float>(q.size()), std::vector<float>(q.size())};
  for (int step = 0; step < 2; ++step) {
    for (int c = 0; c < 2; ++c) {
      ASSERT_TRUE(caches[c]->attend(seqs[c], 0, q.data(), k.data(), v.data(), nullptr, n, 0.125f, outs[c].data(), pool)
                      .is_ok());
      caches[c]->commit(seqs[c], n);
    }
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(outs[1][i], outs[0][i]) << "step " << step << " " << i;
  }
}

}  // namespace
}  // namespace vlkv
