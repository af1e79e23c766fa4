// Q Cache (qcache_gla / qcache_vla): grouping, JSD, calibration maps, the attention of a
// lazy layer vs a hand-computed reference, composition with inner methods, accounting.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "kv/methods/qcache/calibration.h"
#include "kv/methods/qcache/calibration_collector.h"
#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using calibration::Grouping;
using kvtest::random_vec;

constexpr KvGeometry kGeom{4, 4, 2, 64};

// ---------------- grouping ----------------
TEST(QcacheGrouping, ThresholdCountPatternRandomAndExplicit) {
  const std::vector<double> jsd = {0.30, 0.01, 0.02, 0.50, 0.005};  // layers (0,1) .. (4,5)
  const Grouping t = calibration::group_by_threshold(jsd, 0.05);
  EXPECT_EQ(t.base, (std::vector<int>{-1, -1, 1, 1, -1, 4}));
  EXPECT_EQ(t.lazy_layers(), (std::vector<int>{2, 3, 5}));
  EXPECT_EQ(t.blocks(), (std::vector<std::vector<int>>{{0}, {1, 2, 3}, {4, 5}}));
  const Grouping c = calibration::group_by_count(jsd, 2);  // the two smallest: (4,5) then (1,2)
  EXPECT_EQ(c.lazy_layers(), (std::vector<int>{2, 5}));
  EXPECT_EQ(c.base[2], 1);
  EXPECT_EQ(calibration::group_by_count(jsd, 99).n_lazy(), 5);  // clamped: layer 0 always standard
  EXPECT_EQ(calibration::pattern_grouping(2).n_lazy(), 0);
  EXPECT_EQ(calibration::pattern_grouping(4).n_lazy(), 0);
  EXPECT_EQ(calibration::pattern_grouping(8).lazy_layers(), (std::vector<int>{3, 5}));
  EXPECT_EQ(calibration::pattern_grouping(32).n_lazy(), 14);
  const Grouping r1 = calibration::random_grouping(16, 6, 7), r2 = calibration::random_grouping(16, 6, 7);
  EXPECT_EQ(r1.base, r2.base);
  EXPECT_EQ(r1.n_lazy(), 6);
  EXPECT_EQ(r1.base[0], -1);
  EXPECT_NE(calibration::random_grouping(16, 6, 8).base, r1.base);  // another seed, another draw (fixed seeds)
  EXPECT_FALSE(calibration::grouping_from_lazy(4, {0}).is_ok());
  EXPECT_FALSE(calibration::grouping_from_lazy(4, {2, 2}).is_ok());
  EXPECT_FALSE(calibration::grouping_from_lazy(4, {4}).is_ok());
  EXPECT_EQ(calibration::grouping_from_lazy(4, {2, 3})->base, (std::vector<int>{-1, -1, 1, 1}));
}

// ---------------- JSD ----------------
double entropy(const std::vector<double>& p) {
  double h = 0;
  for (double x : p)
    if (x > 0) h -= x * std::log(x);
  return h;
}

TEST(QcacheJsd, MatchesEntropyFormulaAndBounds) {
  // JSD = H((P + Q) / 2) - (H(P) + H(Q)) / 2, computed independently in double.
  for (uint32_t seed = 1; seed < 20; ++seed) {
    const int n = 5 + static_cast<int>(seed) * 7;
    std::vector<float> p = random_vec(n, seed, 0.0f, 1.0f), q = random_vec(n, seed + 100, 0.0f, 1.0f);
    if (seed % 3 == 0) p[0] = 0.0f;  // zero-probability outcomes count 0
    double sp = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      sp += p[i];
      sq += q[i];
    }
    std::vector<double> a(n), b(n), m(n);
    for (int i = 0; i < n; ++i) {
      a[i] = p[i] / sp;
      b[i] = q[i] / sq;
      m[i] = 0.5 * (a[i] + b[i]);
    }
    const double ref = entropy(m) - 0.5 * (entropy(a) + entropy(b));
    EXPECT_NEAR(calibration::jensen_shannon(p.data(), q.data(), n), ref, 1e-9) << seed;  // double sums of n <= 140 terms
  }
  const float x[3] = {0.2f, 0.3f, 0.5f}, y[3] = {1.0f, 0.0f, 0.0f}, z[3] = {0.0f, 0.0f, 1.0f};
  EXPECT_NEAR(calibration::jensen_shannon(x, x, 3), 0.0, 1e-12);
  EXPECT_NEAR(calibration::jensen_shannon(y, z, 3), std::log(2.0), 1e-12);  // disjoint supports: ln 2
}

TEST(QcacheCollector, AttentionMapsAndAdjacentJsd) {
  calibration::CollectorShape sh;
  sh.n_layers = 3;
  sh.n_heads = 2;
  sh.n_kv_heads = 1;
  sh.head_dim = 8;
  sh.scale = 0.35f;
  sh.queries_per_chunk = 4;
  calibration::AttentionMapCollector col(sh);
  const int n = 10;
  const std::vector<TokenKind> kinds = {TokenKind::kText,   TokenKind::kVisual, TokenKind::kVisual, TokenKind::kVisual,
                                        TokenKind::kVisual, TokenKind::kText,   TokenKind::kText,   TokenKind::kText,
                                        TokenKind::kText,   TokenKind::kText};
  const auto q0 = random_vec(n * 2 * 8, 1), k0 = random_vec(n * 8, 2), q2 = random_vec(n * 2 * 8, 3);
  col.add(0, n, q0.data(), k0.data(), kinds.data());
  col.add(1, n, q0.data(), k0.data(), kinds.data());  // layer 1 == layer 0: JSD 0
  col.add(2, n, q2.data(), k0.data(), kinds.data());  // other queries: JSD > 0
  const auto jw = col.jsd_adjacent(), jv = col.jsd_adjacent_visual();
  EXPECT_NEAR(jw[0], 0.0, 1e-9);
  EXPECT_NEAR(jv[0], 0.0, 1e-9);
  EXPECT_EQ(col.n_queries(), 4);  // tokens 0, 3, 6, 9
  // By hand: sampled queries 0, 3, 6, 9; both heads; maps over keys 0..t.
  double sum = 0, sum_v = 0;
  int n_v = 0;
  for (int t : {0, 3, 6, 9}) {
    double w = 0, v = 0;
    int heads_v = 0;
    for (int h = 0; h < 2; ++h) {
      std::vector<float> a(t + 1), b(t + 1);
      calibration::AttentionMapCollector::attention_map(&q0[(t * 2 + h) * 8], k0.data(), 8, t + 1, 8, 0.35f, a.data());
      calibration::AttentionMapCollector::attention_map(&q2[(t * 2 + h) * 8], k0.data(), 8, t + 1, 8, 0.35f, b.data());
      double sa = 0;
      for (float e : a) sa += e;
      EXPECT_NEAR(sa, 1.0, 1e-5);
      w += calibration::jensen_shannon(a.data(), b.data(), t + 1);
      std::vector<float> av, bv;
      for (int j = 0; j <= t; ++j)
        if (kinds[j] == TokenKind::kVisual) {
          av.push_back(a[j]);
          bv.push_back(b[j]);
        }
      if (!av.empty()) {
        v += calibration::jensen_shannon(av.data(), bv.data(), static_cast<int64_t>(av.size()));
        ++heads_v;
      }
    }
    sum += w / 2;
    if (heads_v) {
      sum_v += v / heads_v;
      ++n_v;
    }
  }
  EXPECT_NEAR(jw[1], sum / 4, 1e-9);
  EXPECT_NEAR(jv[1], sum_v / n_v, 1e-9);
  EXPECT_GT(jw[1], 1e-4);
}

// ---------------- maps ----------------
std::string temp_path(const std::string& name) { return ::testing::TempDir() + "qcache_" + name; }

calibration::CalibrationMap sample_map() {
  calibration::CalibrationMap m;
  m.model = {"llama", kGeom.n_layers, kGeom.n_heads, kGeom.n_kv_heads, kGeom.head_dim, 0x1234};
  m.jsd_adjacent = {0.2, 0.01, 0.3};
  m.jsd_adjacent_visual = {0.1, 0.4, 0.02};
  m.grouping = calibration::group_by_count(m.jsd_adjacent_visual, 1);
  m.n_prompts = 2;
  m.n_queries = 64;
  return m;
}

TEST(QcacheMap, RoundTripAndErrors) {
  const std::string path = temp_path("map.json");
  ASSERT_TRUE(calibration::save_map(path, sample_map()).is_ok());
  KvGeometry g = kGeom;
  g.model_fingerprint = 0x1234;
  auto m = calibration::load_map(path, g);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->grouping.lazy_layers(), (std::vector<int>{3}));
  EXPECT_EQ(m->jsd_adjacent_visual, (std::vector<double>{0.1, 0.4, 0.02}));
  EXPECT_EQ(m->criterion_jsd(), m->jsd_adjacent_visual);

  g.model_fingerprint = 0x9999;  // another model of the same shape
  auto other = calibration::load_map(path, g);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("another model"), std::string::npos) << other.status().message();
  KvGeometry g2 = kGeom;
  g2.n_layers = 6;
  auto shape = calibration::load_map(path, g2);
  ASSERT_FALSE(shape.is_ok());
  EXPECT_NE(shape.status().message().find("4 layers"), std::string::npos) << shape.status().message();

  auto write = [&](const std::string& text) {
    std::ofstream(path) << text;
    return calibration::load_map(path, kGeom);
  };
  auto garbage = write("not json {");
  ASSERT_FALSE(garbage.is_ok());
  EXPECT_NE(garbage.status().message().find("not JSON"), std::string::npos);
  auto foreign = write(R"({"layers": [1, 2]})");
  ASSERT_FALSE(foreign.is_ok());
  EXPECT_NE(foreign.status().message().find("not a vlkv Q Cache map"), std::string::npos);
  std::string broken = calibration::map_to_json(sample_map());
  broken.replace(broken.find("\"lazy_layers\""), 13, "\"lazy_layerz\"");
  EXPECT_FALSE(write(broken).is_ok());
  EXPECT_FALSE(calibration::load_map(temp_path("missing.json"), kGeom).is_ok());
  std::remove(path.c_str());
}

// ---------------- methods: specs, composition ----------------
TEST(QcacheMethod, SpecsCompositionAndBadInput) {
  auto ok = [](const std::string& s) {
    auto m = create_method(s, kGeom);
    EXPECT_TRUE(m.is_ok()) << s << ": " << m.status().message();
    return m.is_ok() ? (*m)->spec() : std::string();
  };
  EXPECT_EQ(ok("qcache_gla"), "qcache_gla:grouping=prefill,probes=16,n_lazy=0+f16");  // 4 layers: pattern's count 0
  EXPECT_EQ(ok("qcache_vla:n_lazy=2,probes=8+kivi2"),
            "qcache_vla:share=scores,grouping=prefill,probes=8,n_lazy=2+kivi2:g=32,residual=128,window=f16");
  EXPECT_EQ(ok("qcache_gla:threshold=0.1"), "qcache_gla:grouping=prefill,threshold=0.1,probes=16+f16");
  EXPECT_EQ(ok("qcache_gla:grouping=pattern"), "qcache_gla:grouping=pattern,n_lazy=0,lazy=none+f16");
  EXPECT_EQ(ok("qcache_gla:lazy=2.3+kivi2"), "qcache_gla:grouping=pattern,n_lazy=2,lazy=2.3+kivi2:g=32,residual=128,window=f16");
  EXPECT_EQ(ok("qcache_vla:grouping=random,seed=3,n_lazy=2+vidkv").rfind("qcache_vla:share=scores,grouping=random,seed=3,n_lazy=2,lazy=", 0), 0u);
  // The canonical spec re-creates the same method.
  const std::string canon = ok("qcache_vla:grouping=random,seed=5,n_lazy=2");
  EXPECT_EQ(ok(canon), canon);
  auto err = [](const std::string& s) {
    auto m = create_method(s, kGeom);
    EXPECT_FALSE(m.is_ok()) << s;
    return m.is_ok() ? std::string() : m.status().message();
  };
  EXPECT_NE(err("kivi2+f16").find("does not wrap"), std::string::npos);
  EXPECT_NE(err("qcache_gla+nosuch").find("unknown KV method 'nosuch'"), std::string::npos);
  EXPECT_NE(err("qcache_gla:lazy=0").find("layer 0"), std::string::npos);
  EXPECT_NE(err("qcache_gla:lazy=1.x").find("lazy=1.x"), std::string::npos);
  EXPECT_NE(err("qcache_gla:grouping=best").find("grouping=best"), std::string::npos);
  EXPECT_NE(err("qcache_gla:grouping=pattern,n_lazy=2").find("n_lazy needs map"), std::string::npos);
  EXPECT_NE(err("qcache_gla:n_lazy=4").find("only 3 layers"), std::string::npos);
  EXPECT_NE(err("qcache_gla:grouping=prefill,lazy=2").find("lazy=... fixes the grouping"), std::string::npos);
  EXPECT_NE(err("qcache_gla:grouping=pattern,probes=4").find("probes is a parameter of grouping=prefill"),
            std::string::npos);
  EXPECT_NE(err("qcache_gla:probes=0").find("probes"), std::string::npos);
  EXPECT_NE(err("qcache_gla:grouping=random,n_lazy=9").find("n_lazy=9"), std::string::npos);
  EXPECT_NE(err("qcache_vla:map=/nonexistent/dir/map.json").find("/nonexistent/dir/map.json"), std::string::npos);
  EXPECT_NE(err("qcache_gla:grouping=pattern,threshold=0.1").find("threshold needs map"), std::string::npos);
  EXPECT_NE(err("qcache_gla:wat=1").find("no parameter 'wat'"), std::string::npos);
  EXPECT_NE(err("qcache_vla:share=both").find("share=both"), std::string::npos);
  EXPECT_NE(err("qcache_gla:share=keys").find("no parameter 'share'"), std::string::npos);
}

TEST(QcacheMethod, MapGroupingAndRegrouping) {
  const std::string path = temp_path("map2.json");
  ASSERT_TRUE(calibration::save_map(path, sample_map()).is_ok());
  auto lazy_of = [&](const std::string& params) {
    auto m = create_method("qcache_vla:map=" + path + params, kGeom);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    std::vector<int> out;
    for (int l = 0; l < kGeom.n_layers && m.is_ok(); ++l)
      if ((*m)->layer_plan(l).score_layer >= 0) out.push_back(l);
    return out;
  };
  EXPECT_EQ(lazy_of(""), (std::vector<int>{3}));               // the map's blocks
  EXPECT_EQ(lazy_of(",n_lazy=2"), (std::vector<int>{1, 3}));   // regrouped by the visual JSDs
  EXPECT_EQ(lazy_of(",threshold=0.2"), (std::vector<int>{1, 3}));
  EXPECT_EQ(lazy_of(",grouping=random,seed=1").size(), 1u);    // as many lazy layers as the map
  auto gla = create_method("qcache_gla:map=" + path, kGeom);
  ASSERT_TRUE(gla.is_ok());
  EXPECT_FALSE((*gla)->layer_plan(3).stores_k);
  EXPECT_EQ((*gla)->layer_plan(3).score_layer, 2);
  auto vla = create_method("qcache_vla:map=" + path, kGeom);
  EXPECT_TRUE((*vla)->layer_plan(3).stores_k);
  EXPECT_TRUE((*vla)->layer_plan(3).visual_only);
  EXPECT_TRUE((*vla)->layer_plan(3).base_scores);
  EXPECT_FALSE((*create_method("qcache_vla:share=keys,map=" + path, kGeom))->layer_plan(3).base_scores);
  std::remove(path.c_str());
}

// ---------------- attention of lazy layers ----------------
struct Cache {
  std::unique_ptr<KvCache> cache;
  SeqId seq = 0;
};
Cache make_cache(const std::string& method, KvGeometry g = kGeom) {
  Cache out;
  out.cache = kvtest::small_page_cache(method, g);
  out.seq = out.cache->add_sequence().value();
  return out;
}

enum class Share { kGla, kVlaScores, kVlaKeys };

// One step as the decoder runs it for lazy layer 1 (base 0) of a 2-layer geometry: each
// layer passes its own q and k; the cache attends GLA with the base's q and k, VLA with its
// own q and k plus the base's for the visual keys (share=scores: scored with the base's q;
// share=keys: the base's visual keys with its own q). Checks layer 1's
// output against the hand-computed softmax(per-key q . K) . V1 over stored rows (read_back;
// a lazy layer's K-less rows read back 0 and take the base layer's row of the same storage
// position: the segments mirror each other).
void lazy_step(Cache& c, Share share, int n_new, uint32_t seed, const std::vector<TokenKind>& kinds, double tol,
               ThreadPool& pool) {
  const KvGeometry g{2, 4, 2, 64};
  const int d = g.head_dim, group = g.n_heads / g.n_kv_heads;
  const float scale = 0.125f;
  const int64_t n_cached = c.cache->n_tokens(c.seq);
  const size_t qn = static_cast<size_t>(n_new) * g.n_heads * d, kn = static_cast<size_t>(n_new) * g.n_kv_heads * d;
  auto q0 = random_vec(qn, seed, -2, 2), k0 = random_vec(kn, seed + 1, -2, 2), v0 = random_vec(kn, seed + 2);
  auto q1 = random_vec(qn, seed + 3, -2, 2), k1 = random_vec(kn, seed + 4, -2, 2), v1 = random_vec(kn, seed + 5);
  std::vector<std::vector<float>> bk(g.n_kv_heads), bv(g.n_kv_heads), lk(g.n_kv_heads), lv(g.n_kv_heads);
  for (int h = 0; h < g.n_kv_heads; ++h) {
    ASSERT_TRUE(c.cache->read_back(c.seq, 0, h, &bk[h], &bv[h]).is_ok());
    ASSERT_TRUE(c.cache->read_back(c.seq, 1, h, &lk[h], &lv[h]).is_ok());
  }
  std::vector<float> out0(qn), out1(qn);
  ASSERT_TRUE(c.cache->attend(c.seq, 0, q0.data(), k0.data(), v0.data(), kinds.data(), n_new, scale, out0.data(), pool).is_ok());
  const LayerPlan plan = c.cache->next_step_plan(c.seq, 1, n_new);
  ASSERT_EQ(plan.score_layer, 0);
  ASSERT_EQ(plan.visual_only, share != Share::kGla);
  ASSERT_EQ(plan.base_scores, share == Share::kVlaScores);
  std::vector<float> q_eff = share == Share::kGla ? q0 : q1, k_eff = share == Share::kGla ? k0 : k1;
  if (share == Share::kVlaKeys)
    for (int i = 0; i < n_new; ++i)
      if (kinds[i] == TokenKind::kVisual) std::copy_n(&k0[i * g.n_kv_heads * d], g.n_kv_heads * d, &k_eff[i * g.n_kv_heads * d]);
  const bool exact = share == Share::kVlaScores;
  ASSERT_TRUE(c.cache->attend(c.seq, 1, q1.data(), k1.data(), v1.data(), kinds.data(), n_new, scale, out1.data(), pool)
                  .is_ok());
  c.cache->commit(c.seq, n_new);
  for (int h = 0; h < g.n_kv_heads; ++h) {
    std::vector<float> keys = lk[h], vals = lv[h];
    std::vector<uint8_t> base(keys.size() / d, 0);  // key scored with the base layer's q
    for (size_t t = 0; t < base.size(); ++t) {
      bool zero = true;
      for (int i = 0; i < d; ++i) zero = zero && keys[t * d + i] == 0.0f;
      if (share == Share::kGla) {
        ASSERT_TRUE(zero) << "GLA lazy layer stored K";
      }
      if (zero) std::copy_n(&bk[h][t * d], d, &keys[t * d]);
      base[t] = zero && exact;
    }
    for (int j = 0; j < n_new; ++j) {  // the step's new keys, in order
      const bool from_base = exact && kinds[j] == TokenKind::kVisual;
      const float* kr = from_base ? &k0[(j * g.n_kv_heads + h) * d] : &k_eff[(j * g.n_kv_heads + h) * d];
      keys.insert(keys.end(), kr, kr + d);
      vals.insert(vals.end(), &v1[(j * g.n_kv_heads + h) * d], &v1[(j * g.n_kv_heads + h) * d] + d);
      base.push_back(from_base);
    }
    for (int i = 0; i < n_new; ++i)
      for (int hh = 0; hh < group; ++hh) {
        const size_t row = (static_cast<size_t>(i) * g.n_heads + h * group + hh) * d;
        std::vector<double> ref(d);
        kvtest::ref_attention_row(&q_eff[row], keys.data(), vals.data(), n_cached + i + 1, d, scale, ref.data(), &q0[row],
                                  base.data());
        ASSERT_LT(kvtest::rel_err(&out1[row], ref.data(), d), tol) << "token " << i << " head " << h << " cached " << n_cached;
      }
  }
}

TEST(QcacheAttention, GlaLazyLayerIsBaseProbabilitiesTimesOwnValues) {
  ThreadPool pool(2);
  // f32 inner: the reference is exact up to float summation order (1e-4 relative, as the
  // conformance test); kivi2 inner: reference over its stored rows, 5e-3 (dot=16: its tiled
  // integer decode rounds queries/probabilities to 15/14 bits: method_conformance_test.cpp).
  for (const std::string inner : {"f32", "kivi2:residual=32,dot=16"}) {
    const double tol = inner == "f32" ? 1e-4 : 5e-3;
    SCOPED_TRACE(inner);
    Cache c = make_cache("qcache_gla:lazy=1+" + inner, KvGeometry{2, 4, 2, 64});
    std::vector<TokenKind> kinds(70, TokenKind::kVisual);
    lazy_step(c, Share::kGla, 70, 1, kinds, tol, pool);
    for (int s = 0; s < 40; ++s) lazy_step(c, Share::kGla, 1, 100 + 7 * s, {TokenKind::kText}, tol, pool);
  }
}

TEST(QcacheAttention, VlaVisualScoresOfTheBaseLayerTextScoresOwn) {
  ThreadPool pool(2);
  for (const Share share : {Share::kVlaScores, Share::kVlaKeys})
    for (const std::string inner : {"f32", "kivi2:residual=32,dot=16"}) {
      const double tol = inner == "f32" ? 1e-4 : 5e-3;
      SCOPED_TRACE(inner + (share == Share::kVlaKeys ? " share=keys" : " share=scores"));
      Cache c = make_cache(std::string("qcache_vla:share=") + (share == Share::kVlaKeys ? "keys" : "scores") +
                               ",lazy=1+" + inner,
                           KvGeometry{2, 4, 2, 64});
      std::vector<TokenKind> kinds(80, TokenKind::kVisual);
      for (int i = 0; i < 6; ++i) kinds[i] = TokenKind::kText;
      for (int i = 70; i < 80; ++i) kinds[i] = TokenKind::kText;
      lazy_step(c, share, 80, 3, kinds, tol, pool);
      for (int s = 0; s < 40; ++s)
        lazy_step(c, share, 1, 500 + 7 * s, {s % 3 ? TokenKind::kText : TokenKind::kVisual}, tol, pool);
      // A visual prefill chunk after text: mixed new tokens again.
      std::vector<TokenKind> mixed(40, TokenKind::kVisual);
      for (int i = 0; i < 40; i += 5) mixed[i] = TokenKind::kText;
      lazy_step(c, share, 40, 900, mixed, tol, pool);
    }
}

// Lazy layers hold V only: bytes held vs the method's exact count, and the steady state.
TEST(QcacheAccounting, LazyLayersHoldValuesOnly) {
  ThreadPool pool(1);
  const KvGeometry g = kGeom;
  for (const std::string spec : {"qcache_gla:lazy=1.3+f16", "qcache_vla:lazy=2.3+kivi2", "qcache_gla:lazy=2+vidkv"}) {
    auto m = create_method(spec, g);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    auto inner = create_method(spec.substr(spec.find('+') + 1), g);
    ASSERT_TRUE(inner.is_ok());
    const int n_lazy = spec.find("1.3") != std::string::npos || spec.find("2.3") != std::string::npos ? 2 : 1;
    if (spec.find("f16") != std::string::npos || spec.find("kivi2") != std::string::npos) {
      // K and V cost the same: each lazy layer saves half of its bytes.
      EXPECT_NEAR((*m)->bytes_per_token(), (*inner)->bytes_per_token() * (1.0 - 0.5 * n_lazy / g.n_layers), 1e-9) << spec;
    } else {
      EXPECT_LT((*m)->bytes_per_token(), (*inner)->bytes_per_token());
    }
    EXPECT_NEAR((*m)->bits_per_element(), (*m)->bytes_per_token() * 8 / (2.0 * g.n_layers * g.n_kv_heads * g.head_dim), 1e-9);

    Cache c = make_cache(spec, g);
    const int d = g.head_dim;
    int64_t n = 0;
    for (int s = 0; s < 30; ++s) {
      const int n_new = s == 0 ? 200 : 5;
      auto q = random_vec(static_cast<size_t>(n_new) * g.n_heads * d, s);
      auto kv = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, s + 1);
      std::vector<float> out(q.size());
      std::vector<TokenKind> kinds(n_new, TokenKind::kVisual);
      for (int l = 0; l < g.n_layers; ++l)
        ASSERT_TRUE(c.cache->attend(c.seq, l, q.data(), kv.data(), kv.data(), kinds.data(), n_new, 0.125f, out.data(), pool)
                        .is_ok());
      c.cache->commit(c.seq, n_new);
      n += n_new;
    }
    const double reported = (*m)->bytes_for_tokens(n);
    const double slack = static_cast<double>((*m)->max_streams_per_head()) * g.n_layers * g.n_kv_heads * 4096;
    EXPECT_GE(static_cast<double>(c.cache->bytes_in_use()), reported) << spec;
    EXPECT_LE(static_cast<double>(c.cache->bytes_in_use()), reported + slack) << spec;
    EXPECT_LT(reported, (*inner)->bytes_for_tokens(n)) << spec;
  }
}

}  // namespace
}  // namespace vlkv
