// KvCache::attend against a plain double-precision softmax attention: prefill with
// many new tokens, then decode steps, several sequences, GQA, small pages so every
// stream crosses page boundaries, f32 and f16 methods, at every SIMD level; plus
// rollback, OOM and the method registry's errors.
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/fp16.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

// All inputs ever given to one sequence, per layer: [n_tokens, n_kv_heads, head_dim].
struct History {
  std::vector<std::vector<float>> k, v;  // [n_layers]
};

struct Step {
  std::vector<float> q, k, v;  // q: [n_new, n_heads, d]; k, v: [n_new, n_kv, d]
};

Step make_step(const KvGeometry& g, int n_new, uint32_t seed) {
  Step s;
  s.q = random_vec(static_cast<size_t>(n_new) * g.n_heads * g.head_dim, seed, -2.0f, 2.0f);
  s.k = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * g.head_dim, seed + 1, -2.0f, 2.0f);
  s.v = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * g.head_dim, seed + 2, -1.0f, 1.0f);
  return s;
}

// Runs one step on all layers and checks each layer's output against the double
// reference built from what the cache holds before the step (read_back) plus the
// exact new K/V. Returns the worst relative error; optionally also the worst error
// against the reference over the exact (never rounded) history.
double run_and_check(KvCache& cache, SeqId seq, const KvGeometry& g, History& hist, int n_new, uint32_t seed,
                     ThreadPool& pool, double* err_vs_exact = nullptr, double* f16_bound_ratio = nullptr) {
  const int d = g.head_dim, group = g.n_heads / g.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  double worst = 0;
  const int64_t n_cached = cache.n_tokens(seq);
  for (int l = 0; l < g.n_layers; ++l) {
    Step s = make_step(g, n_new, seed + 17 * l);
    // Stored rows before the step, per kv head: [n_cached, d].
    std::vector<std::vector<float>> sk(g.n_kv_heads), sv(g.n_kv_heads);
    for (int h = 0; h < g.n_kv_heads; ++h) EXPECT_TRUE(cache.read_back(seq, l, h, &sk[h], &sv[h]).is_ok());
    std::vector<float> out(s.q.size());
    Status st = cache.attend(seq, l, s.q.data(), s.k.data(), s.v.data(), nullptr, n_new, scale, out.data(), pool);
    EXPECT_TRUE(st.is_ok()) << st.message();
    hist.k[l].insert(hist.k[l].end(), s.k.begin(), s.k.end());
    hist.v[l].insert(hist.v[l].end(), s.v.begin(), s.v.end());
    for (int h = 0; h < g.n_kv_heads; ++h) {
      // keys/vals as the cache sees them: stored rows then the exact new rows; and the exact ones.
      const int64_t total = n_cached + n_new;
      std::vector<float> keys(total * d), vals(total * d), ekeys(total * d), evals(total * d);
      for (int64_t t = 0; t < total; ++t)
        for (int i = 0; i < d; ++i) {
          const size_t src = (t * g.n_kv_heads + h) * d + i;
          ekeys[t * d + i] = hist.k[l][src];
          evals[t * d + i] = hist.v[l][src];
          keys[t * d + i] = t < n_cached ? sk[h][t * d + i] : hist.k[l][src];
          vals[t * d + i] = t < n_cached ? sv[h][t * d + i] : hist.v[l][src];
        }
      std::vector<double> ref(d), eref(d);
      for (int i = 0; i < n_new; ++i)
        for (int hh = 0; hh < group; ++hh) {
          const int head = h * group + hh;
          const float* qr = &s.q[(static_cast<size_t>(i) * g.n_heads + head) * d];
          const float* o = &out[(static_cast<size_t>(i) * g.n_heads + head) * d];
          kvtest::ref_attention_row(qr, keys.data(), vals.data(), n_cached + i + 1, d, scale, ref.data());
          worst = std::max(worst, kvtest::rel_err(o, ref.data(), d));
          if (err_vs_exact) {
            kvtest::ref_attention_row(qr, ekeys.data(), evals.data(), n_cached + i + 1, d, scale, eref.data());
            *err_vs_exact = std::max(*err_vs_exact, kvtest::rel_err(o, eref.data(), d));
            // First-order bound of f16 storage error on one output (see F16MatchesWithinHalfPrecisionBound).
            double max_ds = 0, max_v = 0;
            for (int64_t t = 0; t < n_cached; ++t) {
              double m = 0;
              for (int x = 0; x < d; ++x) m += std::abs(qr[x] * ekeys[t * d + x]);
              max_ds = std::max(max_ds, m * scale / 2048.0);
            }
            for (float e : evals) max_v = std::max(max_v, static_cast<double>(std::abs(e)));
            double err = 0;
            for (int x = 0; x < d; ++x) err = std::max(err, std::abs(o[x] - eref[x]));
            const double bound = 2.0 * max_v * max_ds + max_v / 2048.0 + 1e-6;
            if (f16_bound_ratio) *f16_bound_ratio = std::max(*f16_bound_ratio, err / bound);
          }
        }
    }
  }
  cache.commit(seq, n_new);
  return worst;
}

struct Config {
  std::string method;
  KvGeometry g;
  friend void PrintTo(const Config& c, std::ostream* os) {
    *os << c.method << " heads=" << c.g.n_heads << " kv=" << c.g.n_kv_heads << " d=" << c.g.head_dim;
  }
};

class AttendVsReference : public ::testing::TestWithParam<Config> {};

TEST_P(AttendVsReference, PrefillThenDecodeSeveralSequences) {
  const Config& cfg = GetParam();
  kvtest::SimdLevelGuard guard;
  for (SimdLevel level : kvtest::simd_levels()) {
    set_simd_level_for_testing(level);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      KvCacheConfig kc;
      kc.geometry = cfg.g;
      kc.method = cfg.method;
      kc.page_bytes = 1024;  // a few tokens per page: every stream crosses pages
      kc.budget_bytes = 64 << 20;
      auto cache = KvCache::create(kc);
      ASSERT_TRUE(cache.is_ok()) << cache.status().message();
      std::vector<SeqId> seqs;
      std::vector<History> hist(3);
      for (int i = 0; i < 3; ++i) {
        seqs.push_back((*cache)->add_sequence().value());
        hist[i].k.resize(cfg.g.n_layers);
        hist[i].v.resize(cfg.g.n_layers);
      }
      double worst = 0;
      // Prefills of different lengths (one > a tile of queries), interleaved decode steps, a second chunk.
      const int prefill[3] = {37, 1, 70};
      for (int i = 0; i < 3; ++i)
        worst = std::max(worst, run_and_check(**cache, seqs[i], cfg.g, hist[i], prefill[i], 100 + i, pool));
      for (int step = 0; step < 6; ++step)
        for (int i = 0; i < 3; ++i)
          worst = std::max(worst, run_and_check(**cache, seqs[i], cfg.g, hist[i], 1, 1000 + 10 * step + i, pool));
      worst = std::max(worst, run_and_check(**cache, seqs[0], cfg.g, hist[0], 9, 5000, pool));
      // f32 accumulation over <= ~100 keys; 1e-5 of the output's magnitude.
      EXPECT_LT(worst, 1e-5) << cfg.method << " " << simd_level_name(level) << " threads=" << threads;
      EXPECT_EQ((*cache)->n_tokens(seqs[0]), 37 + 6 + 9);
      uint64_t held = 0;
      for (SeqId s : seqs) held += (*cache)->sequence_bytes(s);
      EXPECT_EQ(held, (*cache)->bytes_in_use());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Methods, AttendVsReference,
    ::testing::Values(Config{"f32", {2, 8, 2, 64}}, Config{"f16", {2, 8, 2, 64}}, Config{"f32", {1, 3, 3, 36}},
                      Config{"f16", {1, 4, 1, 72}}, Config{"f32", {1, 16, 2, 128}}),
    [](const auto& info) {
      return info.param.method + "_h" + std::to_string(info.param.g.n_heads) + "_kv" +
             std::to_string(info.param.g.n_kv_heads) + "_d" + std::to_string(info.param.g.head_dim);
    });

// f16 storage vs the exact history. Per output element, to first order,
//   out' - out = sum_t p_t ds_t (v_t - out) + sum_t p_t dv_t,
// with |ds_t| <= scale * sum_i |q_i k_ti| * 2^-11 (half rounding of k) and |dv_t| <= 2^-11 |v_t|,
// so |out' - out| <= 2 max|v| max_t|ds_t| + 2^-11 max|v|. We require <= 1.5x that bound.
TEST(KvCache, F16MatchesWithinHalfPrecisionBound) {
  const KvGeometry g{1, 4, 2, 64};
  ThreadPool pool(2);
  KvCacheConfig kc;
  kc.geometry = g;
  kc.method = "f16";
  kc.page_bytes = 2048;
  auto cache = KvCache::create(kc);
  ASSERT_TRUE(cache.is_ok());
  SeqId seq = (*cache)->add_sequence().value();
  History hist{{{}}, {{}}};
  double exact = 0, ratio = 0;
  run_and_check(**cache, seq, g, hist, 50, 1, pool, &exact, &ratio);
  for (int i = 0; i < 5; ++i) run_and_check(**cache, seq, g, hist, 1, 10 + i, pool, &exact, &ratio);
  EXPECT_LT(ratio, 1.5);
  EXPECT_GT(exact, 0.0);  // rounding is visible: we really compared against unrounded data
}

TEST(KvCache, RollbackFreesPagesAndRestoresContents) {
  const KvGeometry g{3, 4, 2, 32};
  ThreadPool pool(2);
  KvCacheConfig kc;
  kc.geometry = g;
  kc.method = "f32";
  kc.page_bytes = 512;  // 4 tokens per page
  auto cache = KvCache::create(kc);
  ASSERT_TRUE(cache.is_ok());
  SeqId seq = (*cache)->add_sequence().value();
  History hist{std::vector<std::vector<float>>(3), std::vector<std::vector<float>>(3)};
  run_and_check(**cache, seq, g, hist, 6, 1, pool);
  const uint64_t bytes = (*cache)->bytes_in_use();
  std::vector<float> k0, v0, k1, v1;
  ASSERT_TRUE((*cache)->read_back(seq, 1, 1, &k0, &v0).is_ok());
  // Two of three layers attended with 7 new tokens, then rolled back.
  Step s = make_step(g, 7, 9);
  std::vector<float> out(s.q.size());
  for (int l = 0; l < 2; ++l)
    ASSERT_TRUE((*cache)->attend(seq, l, s.q.data(), s.k.data(), s.v.data(), nullptr, 7, 0.2f, out.data(), pool).is_ok());
  EXPECT_GT((*cache)->bytes_in_use(), bytes);
  EXPECT_EQ((*cache)->layer_tokens(seq, 1), 13);
  (*cache)->rollback(seq);
  EXPECT_EQ((*cache)->bytes_in_use(), bytes);
  EXPECT_EQ((*cache)->layer_tokens(seq, 1), 6);
  ASSERT_TRUE((*cache)->read_back(seq, 1, 1, &k1, &v1).is_ok());
  EXPECT_EQ(k0, k1);
  EXPECT_EQ(v0, v1);
  // And the sequence continues exactly as if the rolled-back step never happened.
  EXPECT_LT(run_and_check(**cache, seq, g, hist, 3, 2, pool), 1e-5);
}

TEST(KvCache, OutOfMemoryIsAStatusAndLeavesTheSequenceUnchanged) {
  const KvGeometry g{2, 2, 1, 64};  // f16: 128 bytes per token per stream, 8 per 1 KiB page
  ThreadPool pool(1);
  KvCacheConfig kc;
  kc.geometry = g;
  kc.method = "f16";
  kc.page_bytes = 1024;
  kc.budget_bytes = 9 * 1024;  // 2 layers x 2 streams x 2 pages = 16 tokens; then 1 page left
  auto cache = KvCache::create(kc);
  ASSERT_TRUE(cache.is_ok());
  SeqId seq = (*cache)->add_sequence().value();
  History hist{std::vector<std::vector<float>>(2), std::vector<std::vector<float>>(2)};
  run_and_check(**cache, seq, g, hist, 16, 1, pool);
  const uint64_t bytes = (*cache)->bytes_in_use();
  EXPECT_EQ(bytes, 8u * 1024);
  std::vector<float> k0, v0, k1, v1;
  ASSERT_TRUE((*cache)->read_back(seq, 0, 0, &k0, &v0).is_ok());
  Step s = make_step(g, 1, 2);
  std::vector<float> out(s.q.size());
  Status st = (*cache)->attend(seq, 0, s.q.data(), s.k.data(), s.v.data(), nullptr, 1, 0.1f, out.data(), pool);
  ASSERT_EQ(st.code(), StatusCode::kOutOfMemory) << st.message();
  EXPECT_NE(st.message().find("KV budget of 9 KiB exhausted at token 17"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("raise --kv-budget or choose a smaller method"), std::string::npos);
  EXPECT_EQ((*cache)->n_tokens(seq), 16);
  EXPECT_EQ((*cache)->layer_tokens(seq, 0), 16);
  EXPECT_EQ((*cache)->bytes_in_use(), bytes);
  ASSERT_TRUE((*cache)->read_back(seq, 0, 0, &k1, &v1).is_ok());
  EXPECT_EQ(k0, k1);
  EXPECT_EQ(v0, v1);
  (*cache)->rollback(seq);  // harmless after the automatic rollback
  (*cache)->remove_sequence(seq);
  EXPECT_EQ((*cache)->bytes_in_use(), 0u);
}

TEST(KvCache, CreateRejectsBadMethodsAndGeometry) {
  KvCacheConfig kc;
  kc.geometry = {2, 8, 2, 64};
  kc.method = "int9";
  auto r = KvCache::create(kc);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("valid methods: "), std::string::npos);
  EXPECT_NE(r.status().message().find("f16"), std::string::npos);
  kc.method = "f16:window=4";
  r = KvCache::create(kc);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("no parameter 'window'"), std::string::npos) << r.status().message();
  kc.method = "f16:";
  EXPECT_FALSE(KvCache::create(kc).is_ok());
  kc.method = "f16";
  kc.geometry = {2, 6, 4, 64};  // 6 % 4 != 0
  EXPECT_EQ(KvCache::create(kc).status().code(), StatusCode::kInvalidArgument);
  kc.geometry = {2, 8, 2, 64};
  kc.page_bytes = 100;  // not a multiple of 64
  EXPECT_EQ(KvCache::create(kc).status().code(), StatusCode::kInvalidArgument);
  kc.page_bytes = 64;  // smaller than one f16 row of 64: each stream's pages then hold one block
  EXPECT_TRUE(KvCache::create(kc).is_ok());
  kc.page_bytes = 4096;
  auto ok = KvCache::create(kc);
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ((*ok)->method_name(), "f16");
  EXPECT_DOUBLE_EQ((*ok)->bits_per_element(), 16.0);
  EXPECT_DOUBLE_EQ((*ok)->bytes_per_token(), 2.0 * 2 * 2 * 64 * 2);
}

// The CLI names the --kv flag from the error's kind, not from its wording: every refusal of a
// method spec (syntax, name, key, value, head_dim, an inner method of a wrapper, a sequence's
// own spec) is ErrorKind::kKvMethod; the cache's own configuration errors are not.
TEST(KvCache, MethodRefusalsCarryTheKvMethodKind) {
  KvCacheConfig kc;
  kc.geometry = {2, 8, 2, 8};  // head_dim 8: int4's default group of 32 does not fit
  for (const char* bad : {"int9", "f16:", "f16:window=4", "int4:g=7", "int4:g=32", "kivi:bits=3",
                          "qcache_gla:n_lazy=1+int4:g=7", "f16+int4"}) {
    kc.method = bad;
    auto r = KvCache::create(kc);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().kind(), ErrorKind::kKvMethod) << bad << ": " << r.status().message();
  }
  kc.method = "f16";
  kc.geometry = {2, 6, 4, 8};  // 6 % 4 != 0: the model's geometry, not the method
  auto geometry = KvCache::create(kc);
  ASSERT_FALSE(geometry.is_ok());
  EXPECT_EQ(geometry.status().kind(), ErrorKind::kGeneral);
  kc.geometry = {2, 8, 2, 8};
  auto cache = KvCache::create(kc);
  ASSERT_TRUE(cache.is_ok());
  Result<SeqId> seq = (*cache)->add_sequence("int4:g=7");
  ASSERT_FALSE(seq.is_ok());
  EXPECT_EQ(seq.status().kind(), ErrorKind::kKvMethod);
  EXPECT_EQ(seq.status().with_context("request").kind(), ErrorKind::kKvMethod);  // context keeps the kind
}

}  // namespace
}  // namespace vlkv
