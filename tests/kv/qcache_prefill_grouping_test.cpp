// Q Cache grouping=prefill (the default without a map): each sequence is grouped from its
// own prompt's attention maps (kStatProbeMaps, probe queries compared layer to layer by
// JSD), the grouping freezes at the first decoded token, and layers that became lazy drop
// the K they stored during the prompt. Checked against the statically grouped method.
#include <gtest/gtest.h>

#include <cmath>

#include "kv/kv_cache.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;
using kvtest::small_page_cache;

// One step's projections per layer: [n, n_heads, d] q, [n, n_kv_heads, d] k and v.
struct StepData {
  std::vector<std::vector<float>> q, k, v;
};

// same_as[l] >= 0: layer l's q and k are layer same_as[l]'s (identical attention maps).
StepData random_step(const KvGeometry& g, int n, uint32_t seed, const std::vector<int>& same_as = {}) {
  StepData s;
  for (int l = 0; l < g.n_layers; ++l) {
    const uint32_t sd = seed + 10 * l;
    const bool copy = l < static_cast<int>(same_as.size()) && same_as[l] >= 0;
    s.q.push_back(copy ? s.q[same_as[l]] : random_vec(static_cast<size_t>(n) * g.n_heads * g.head_dim, sd, -2, 2));
    s.k.push_back(copy ? s.k[same_as[l]] : random_vec(static_cast<size_t>(n) * g.n_kv_heads * g.head_dim, sd + 1, -2, 2));
    s.v.push_back(random_vec(static_cast<size_t>(n) * g.n_kv_heads * g.head_dim, sd + 2));
  }
  return s;
}

// Runs a step as the decoder does: every layer passes its own q and k (the cache uses a
// lazy layer's base's where the grouping says so).
// out: [n_layers][n, n_heads, d].
Status run_step(KvCache& c, SeqId seq, const KvGeometry& g, const StepData& d, const std::vector<TokenKind>& kinds,
                ThreadPool& pool, std::vector<std::vector<float>>* out = nullptr) {
  const int n = static_cast<int>(kinds.size());
  std::vector<std::vector<float>> outs(g.n_layers);
  for (int l = 0; l < g.n_layers; ++l) {
    outs[l].resize(d.q[l].size());
    Status st = c.attend(seq, l, d.q[l].data(), d.k[l].data(), d.v[l].data(), kinds.data(), n, 0.125f, outs[l].data(),
                         pool);
    if (!st.is_ok()) return st;
  }
  c.commit(seq, n);
  if (out) *out = std::move(outs);
  return Status::ok();
}

std::vector<int> lazy_bases(const KvStepCache& c, SeqId seq, const KvGeometry& g, int n_new) {
  std::vector<int> out;
  for (int l = 0; l < g.n_layers; ++l) {
    const int b = c.next_step_plan(seq, l, n_new).score_layer;
    out.push_back(b != l ? b : -1);
  }
  return out;
}

// f32 inner: bytes per token of one (layer, kv head, stream).
double f32_row_bytes(const KvGeometry& g) { return 4.0 * g.head_dim; }

TEST(QcachePrefillGrouping, LazyLayersAreTheOnesWhoseMapsMatchTheLayerBefore) {
  ThreadPool pool(2);
  const KvGeometry g{3, 4, 2, 64};
  const std::vector<TokenKind> text32(32, TokenKind::kText);
  struct Case {
    std::string method;
    std::vector<int> same_as;  // which layers copy another's q and k in the prompt
    std::vector<int> bases;    // expected grouping
  };
  for (const Case& tc : {Case{"qcache_gla:n_lazy=1+f32", {-1, 0, -1}, {-1, 0, -1}},
                         Case{"qcache_gla:n_lazy=1+f32", {-1, -1, 1}, {-1, -1, 1}},
                         Case{"qcache_gla:threshold=1e-6+f32", {-1, 0, -1}, {-1, 0, -1}},
                         Case{"qcache_gla:threshold=1e-6+f32", {-1, -1, -1}, {-1, -1, -1}},
                         Case{"qcache_gla:n_lazy=2+f32", {-1, 0, -1}, {-1, 0, 0}},
                         Case{"qcache_vla:n_lazy=1+f32", {-1, -1, 1}, {-1, -1, 1}}}) {
    SCOPED_TRACE(tc.method);
    auto c = small_page_cache(tc.method, g);
    const SeqId s = c->add_sequence().value();
    // Nothing is lazy while the prompt is read (two chunks, the table sums over both).
    for (int chunk = 0; chunk < 2; ++chunk) {
      EXPECT_EQ(lazy_bases(*c, s, g, 32), (std::vector<int>{-1, -1, -1}));
      ASSERT_TRUE(run_step(*c, s, g, random_step(g, 32, 100 + chunk, tc.same_as), text32, pool).is_ok());
    }
    EXPECT_EQ(c->stored_bytes(s), 64 * f32_row_bytes(g) * 2 * g.n_kv_heads * g.n_layers);
    // The first decoded token freezes the grouping; later steps of any size keep it.
    EXPECT_EQ(lazy_bases(*c, s, g, 1), tc.bases);
    EXPECT_NE(c->describe_sequence(s).find("not chosen yet"), std::string::npos);
    ASSERT_TRUE(run_step(*c, s, g, random_step(g, 1, 7), {TokenKind::kText}, pool).is_ok());
    EXPECT_EQ(lazy_bases(*c, s, g, 1), tc.bases);
    std::string expected = "lazy layers ";  // appended piecewise: GCC 12's false -Wrestrict on "literal" + string&&
    bool any = false;
    for (int l = 0; l < g.n_layers; ++l)
      if (tc.bases[l] >= 0) {
        if (any) expected += '.';
        expected += std::to_string(l);
        any = true;
      }
    if (!any) expected += "none";
    expected += " (chosen from the prompt)";
    EXPECT_EQ(c->describe_sequence(s), expected);
    EXPECT_EQ(lazy_bases(*c, s, g, 20), tc.bases);
  }
}

TEST(QcachePrefillGrouping, DecodeOnlySequenceStaysStandard) {
  ThreadPool pool(2);
  const KvGeometry g{2, 4, 2, 64};
  auto c = small_page_cache("qcache_gla:n_lazy=1+f32", g);
  const SeqId s = c->add_sequence().value();
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(lazy_bases(*c, s, g, 1), (std::vector<int>{-1, -1}));  // no prompt measured: no grouping
    ASSERT_TRUE(run_step(*c, s, g, random_step(g, 1, 30 + t), {TokenKind::kText}, pool).is_ok());
  }
  EXPECT_EQ(c->stored_bytes(s), 5 * f32_row_bytes(g) * 2 * g.n_kv_heads * g.n_layers);
}

// After the freeze, a dynamically grouped sequence holds and computes exactly what the
// same grouping fixed in advance does: its lazy layer's K is gone, decode attention takes
// the base layer's keys (and, VLA, scores) with the layer's own values. Rolling back the
// freezing step restores the dropped K.
TEST(QcachePrefillGrouping, FreezeDropsKAndDecodesLikeTheFixedGrouping) {
  ThreadPool pool(2);
  const KvGeometry g{2, 4, 2, 64};
  for (const std::string mode : {"qcache_gla", "qcache_vla"}) {
    SCOPED_TRACE(mode);
    auto dyn = small_page_cache(mode + ":n_lazy=1+f32", g);
    auto fixed = small_page_cache(mode + ":lazy=1+f32", g);
    const SeqId a = dyn->add_sequence().value(), b = fixed->add_sequence().value();
    std::vector<TokenKind> prompt(48, TokenKind::kVisual);  // 32 visual tokens, then 16 of text
    for (int i = 32; i < 48; ++i) prompt[i] = TokenKind::kText;
    const StepData p = random_step(g, 48, 11);
    ASSERT_TRUE(run_step(*dyn, a, g, p, prompt, pool).is_ok());
    ASSERT_TRUE(run_step(*fixed, b, g, p, prompt, pool).is_ok());
    const double row = f32_row_bytes(g) * g.n_kv_heads;  // one token's K (or V) of one layer
    EXPECT_EQ(dyn->stored_bytes(a), 48 * row * 2 * g.n_layers);  // the prompt keeps every K
    const int dropped = mode == "qcache_gla" ? 48 : 32;          // VLA: the visual tokens' K only
    EXPECT_EQ(fixed->stored_bytes(b), 48 * row * 2 * g.n_layers - dropped * row);

    // The freezing step, rolled back: K and the sequence state are as before.
    std::vector<float> k_before, v_before, k_after, v_after;
    ASSERT_TRUE(dyn->read_back(a, 1, 0, &k_before, &v_before).is_ok());
    const StepData d0 = random_step(g, 1, 50);
    std::vector<float> out(static_cast<size_t>(g.n_heads) * g.head_dim);
    ASSERT_TRUE(dyn->attend(a, 0, d0.q[0].data(), d0.k[0].data(), d0.v[0].data(), prompt.data() + 40, 1, 0.125f,
                            out.data(), pool).is_ok());
    ASSERT_TRUE(dyn->attend(a, 1, d0.q[1].data(), d0.k[1].data(), d0.v[1].data(), prompt.data() + 40, 1, 0.125f,
                            out.data(), pool).is_ok());
    dyn->rollback(a);
    ASSERT_TRUE(dyn->read_back(a, 1, 0, &k_after, &v_after).is_ok());
    EXPECT_EQ(k_after, k_before);
    EXPECT_EQ(dyn->stored_bytes(a), 48 * row * 2 * g.n_layers);

    for (int t = 0; t < 30; ++t) {
      const StepData d = random_step(g, 1, 200 + t);
      const std::vector<TokenKind> kind{t % 3 ? TokenKind::kText : TokenKind::kVisual};
      std::vector<std::vector<float>> out_dyn, out_fixed;
      ASSERT_TRUE(run_step(*dyn, a, g, d, kind, pool, &out_dyn).is_ok());
      ASSERT_TRUE(run_step(*fixed, b, g, d, kind, pool, &out_fixed).is_ok());
      // Same stored rows, same chunking, same kernels: equal up to float summation order.
      for (int l = 0; l < g.n_layers; ++l)
        for (size_t i = 0; i < out_dyn[l].size(); ++i)
          ASSERT_NEAR(out_dyn[l][i], out_fixed[l][i], 1e-5) << "step " << t << " layer " << l;
      ASSERT_EQ(dyn->stored_bytes(a), fixed->stored_bytes(b)) << "step " << t;
    }
  }
}

}  // namespace
}  // namespace vlkv
