// Every registered KV method through the same checks: stored values within the
// method's declared round-trip bound, attention against a double reference over
// what is stored, byte accounting (sequences == pool, vs the method's report),
// thousands of decode steps across page boundaries, copy / remove of sequences.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>

#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

constexpr KvGeometry kGeom{2, 4, 2, 64};

class EveryMethod : public ::testing::TestWithParam<std::string> {};

// K with outlier channels (x20 on channels 1 and d-3) and an occasional massive token
// (x8), as post-RoPE keys of real models have.
std::vector<float> outlier_keys(size_t n_rows, int d, uint32_t seed) {
  std::vector<float> x = random_vec(n_rows * d, seed, -2.0f, 2.0f);
  for (size_t r = 0; r < n_rows; ++r) {
    x[r * d + 1] *= 20.0f;
    x[r * d + d - 3] *= 20.0f;
    if ((seed + r) % 97 == 0)
      for (int i = 0; i < d; ++i) x[r * d + i] *= 8.0f;
  }
  return x;
}

std::unique_ptr<Method> method_of(const std::string& spec) {
  auto m = create_method(spec, kGeom);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(*m) : nullptr;
}

// Tolerance of attention outputs (max error / max |output| of a row) against a double
// reference over the stored rows: f32 sums (1e-4), plus, when a codec's fused ops round
// their inputs (Codec::fused_rounding), what that rounding does through the softmax on this
// test's outlier keys (x20 channels, x8 massive tokens), by the coarsest rounding declared:
// 15-bit queries / 14-bit probabilities 160 * 2^-bits = 4.9e-3 (measured <= 1.5e-3, int2 keys
// per token); 8/7 bits (dot=8, the default of the 2-bit codes) 0.75 (measured 0.53 int2, 0.20
// kivi2, 0.16 zipvl's 2-bit class, 0.11 int4:dot=8, 0.043 akvq_vl: a massive token's score
// moves by up to ~1 logit). A kernel that decodes wrongly is off by O(1); the kernels
// themselves are held to worst-case bounds in int_codec_test.cpp.
double stored_rows_tolerance(const KvCacheStats& cache) {
  auto m = create_method(cache.method_name(), kGeom);
  if (!m.is_ok()) return 1e-4;
  int bits = 0;
  for (const Codec* c : (*m)->codecs()) {
    const Codec::FusedRounding r = c->fused_rounding(kGeom.head_dim);
    for (int b : {r.query_bits, r.prob_bits})
      if (b > 0 && (bits == 0 || b < bits)) bits = b;
  }
  if (bits == 0) return 1e-4;
  return bits >= 14 ? 1e-4 + 160.0 * std::ldexp(1.0, -bits) : 0.75;
}

// Attends n_new tokens on every layer; history gets the exact inputs. Checks the
// output against a double reference over read_back() rows when `check`.
void step(KvCache& cache, SeqId seq, std::vector<std::vector<float>>& hk, std::vector<std::vector<float>>& hv,
          int n_new, uint32_t seed, ThreadPool& pool, bool check, std::vector<float>* outs = nullptr,
          bool outliers = false, double* quant_err = nullptr) {
  const KvGeometry& g = kGeom;
  const int d = g.head_dim, group = g.n_heads / g.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t n_cached = cache.n_tokens(seq);
  const double tol = check ? stored_rows_tolerance(cache) : 0.0;
  for (int l = 0; l < g.n_layers; ++l) {
    auto q = random_vec(static_cast<size_t>(n_new) * g.n_heads * d, seed + 3 * l, -2.0f, 2.0f);
    auto k = outliers ? outlier_keys(static_cast<size_t>(n_new) * g.n_kv_heads, d, seed + 3 * l + 1)
                      : random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * d, seed + 3 * l + 1, -2.0f, 2.0f);
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
      std::vector<double> ref(d), exact(d);
      std::vector<float> hist_k, hist_v;  // the exact history of this head: [total, d]
      if (quant_err) {
        hist_k.resize(total * d);
        hist_v.resize(total * d);
        for (int64_t t = 0; t < total; ++t)
          for (int i = 0; i < d; ++i) {
            hist_k[t * d + i] = hk[l][(t * g.n_kv_heads + h) * d + i];
            hist_v[t * d + i] = hv[l][(t * g.n_kv_heads + h) * d + i];
          }
      }
      for (int i = 0; i < n_new; ++i)
        for (int hh = 0; hh < group; ++hh) {
          const size_t row = (static_cast<size_t>(i) * g.n_heads + h * group + hh) * d;
          kvtest::ref_attention_row(&q[row], keys.data(), vals.data(), n_cached + i + 1, d, scale, ref.data());
          ASSERT_LT(kvtest::rel_err(&out[row], ref.data(), d), tol) << "layer " << l << " token " << i;
          if (quant_err) {  // what storing changed: exact attention over stored vs true rows
            kvtest::ref_attention_row(&q[row], hist_k.data(), hist_v.data(), n_cached + i + 1, d, scale, exact.data());
            for (int e = 0; e < d; ++e) *quant_err = std::max(*quant_err, std::abs(ref[e] - exact[e]));
          }
        }
    }
  }
  cache.commit(seq, n_new);
}

// Stored rows vs the exact history, within the method's declared bound, relative to
// max|x| over the aligned run of block_tokens tokens (Method::error_block_tokens). Rows
// in sequence order (read_back, with Method::stored_positions for out-of-order storage).
void check_round_trip(const KvCacheStats& cache, SeqId seq, const std::vector<std::vector<float>>& hk,
                      const std::vector<std::vector<float>>& hv, double bound, int block_tokens = 1) {
  const KvGeometry& g = kGeom;
  const int d = g.head_dim;
  const int64_t bt = block_tokens, n = cache.layer_tokens(seq, 0);  // committed: every layer's
  for (int l = 0; l < g.n_layers; ++l)
    for (int h = 0; h < g.n_kv_heads; ++h) {
      std::vector<float> k, v;
      ASSERT_TRUE(cache.read_back(seq, l, h, &k, &v).is_ok());
      ASSERT_EQ(static_cast<int64_t>(k.size()), n * d);
      // max|x| per aligned block of bt history tokens (once: bt may span the whole head)
      std::vector<double> block_max_k((n + bt - 1) / bt, 0.0), block_max_v(block_max_k.size(), 0.0);
      for (int64_t u = 0; u < n; ++u)
        for (int i = 0; i < d; ++i) {
          const size_t s2 = (u * g.n_kv_heads + h) * d + i;
          block_max_k[u / bt] = std::max(block_max_k[u / bt], static_cast<double>(std::abs(hk[l][s2])));
          block_max_v[u / bt] = std::max(block_max_v[u / bt], static_cast<double>(std::abs(hv[l][s2])));
        }
      for (int64_t t = 0; t < n; ++t) {
        const size_t src = (t * g.n_kv_heads + h) * d;
        const double mk = block_max_k[t / bt], mv = block_max_v[t / bt];
        for (int i = 0; i < d; ++i) {
          ASSERT_LE(std::abs(k[t * d + i] - hk[l][src + i]), bound * mk + 0x1p-24) << "K l" << l << " t" << t;
          ASSERT_LE(std::abs(v[t * d + i] - hv[l][src + i]), bound * mv + 0x1p-24) << "V l" << l << " t" << t;
        }
      }
    }
}

// Relative RMS round-trip error of each (layer, kv head)'s stored K and V rows vs the
// history, for methods declaring Method::rms_error_bound() (2-bit rotated and 1.x-bit
// codes, whose max-abs bound is uninformative). Rows in sequence order (as above).
void check_rms(const KvCacheStats& cache, SeqId seq, const std::vector<std::vector<float>>& hk,
               const std::vector<std::vector<float>>& hv, double bound) {
  if (bound < 0) return;
  const KvGeometry& g = kGeom;
  const int d = g.head_dim;
  const int64_t n = cache.layer_tokens(seq, 0);  // committed: every layer's
  for (int l = 0; l < g.n_layers; ++l)
    for (int h = 0; h < g.n_kv_heads; ++h) {
      std::vector<float> k, v;
      ASSERT_TRUE(cache.read_back(seq, l, h, &k, &v).is_ok());
      double ek = 0, sk = 0, ev = 0, sv = 0;
      for (int64_t t = 0; t < n; ++t)
        for (int i = 0; i < d; ++i) {
          const size_t src = (t * g.n_kv_heads + h) * d + i;
          ek += std::pow(k[t * d + i] - hk[l][src], 2.0);
          sk += std::pow(hk[l][src], 2.0);
          ev += std::pow(v[t * d + i] - hv[l][src], 2.0);
          sv += std::pow(hv[l][src], 2.0);
        }
      EXPECT_LE(std::sqrt(ek / sk), bound) << "K layer " << l << " head " << h;
      EXPECT_LE(std::sqrt(ev / sv), bound) << "V layer " << l << " head " << h;
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
  const auto method = method_of(GetParam());
  ASSERT_TRUE(method);
  check_round_trip(cache, a, hk, hv, method->error_bound(), method->error_block_tokens());
  check_rms(cache, a, hk, hv, method->rms_error_bound());
  // The method's exact byte count (window included) vs pages held: only page tails
  // (one per stream) differ.
  const double reported = method->bytes_for_tokens(cache.n_tokens(a));
  const double slack = static_cast<double>(method->max_streams_per_head()) * kGeom.n_layers * kGeom.n_kv_heads * kc.page_bytes;
  // Blocks never straddle pages: a page holds floor(page / block) blocks, the rest of it
  // unused (e.g. 72-byte int8 blocks leave 64 of 4096 bytes).
  double pack = 1.0;
  for (const Codec* c : method->codecs()) {
    const double bb = static_cast<double>(c->block_bytes(kGeom.head_dim));
    pack = std::max(pack, kc.page_bytes / (std::floor(kc.page_bytes / bb) * bb));
  }
  // Data-dependent layouts (zipvl's important-token mix) declare a lower bound too.
  EXPECT_GE(static_cast<double>(cache.bytes_in_use()), method->min_bytes_for_tokens(cache.n_tokens(a)));
  EXPECT_LE(static_cast<double>(cache.bytes_in_use()), reported * pack + slack);
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
  check_round_trip(cache, b, hk_b, hv_b, std::max(1.0, method->error_bound()), method->error_block_tokens());
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

// Outlier-heavy keys: prefill then decode across window folds; attention equals the
// reference over what is stored (stored_rows_tolerance), stored rows are within the method's
// declared bound, and the output differs from an f32 cache fed the same data by no more than
// storing changed exact attention (computed in double from the stored and the true rows,
// which check_round_trip holds to the declared error) plus the kernels' declared rounding
// tolerance and f32 sums (1e-4): no method-specific slack, so a wrong kernel fails.
TEST_P(EveryMethod, OutlierHeavyDataAndAttentionVsF32) {
  ThreadPool pool(2);
  auto cache = kvtest::small_page_cache(GetParam(), kGeom, 256ull << 20), ref = kvtest::small_page_cache("f32", kGeom);
  ASSERT_TRUE(cache && ref);
  const SeqId a = cache->add_sequence().value(), r = ref->add_sequence().value();
  std::vector<std::vector<float>> hk(kGeom.n_layers), hv(kGeom.n_layers), rk = hk, rv = hv;
  std::vector<float> out, out_ref;
  step(*cache, a, hk, hv, 300, 7, pool, true, nullptr, true);
  step(*ref, r, rk, rv, 300, 7, pool, false, nullptr, true);
  double quant_err = 0;  // last step: max |exact attention over stored rows - over true rows|
  for (int s = 0; s < 200; ++s) {
    out.clear();
    out_ref.clear();
    const bool last = s == 199;
    step(*cache, a, hk, hv, 1, 500 + s, pool, s % 40 == 0 || last, &out, true, last ? &quant_err : nullptr);
    step(*ref, r, rk, rv, 1, 500 + s, pool, false, &out_ref, true);
  }
  const auto method = method_of(GetParam());
  ASSERT_TRUE(method);
  check_round_trip(*cache, a, hk, hv, method->error_bound(), method->error_block_tokens());
  check_rms(*cache, a, hk, hv, method->rms_error_bound());
  double err = 0, mag = 1e-3;
  for (size_t i = 0; i < out.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(out[i] - out_ref[i])));
    mag = std::max(mag, static_cast<double>(std::abs(out_ref[i])));
  }
  const double allowed = quant_err + (stored_rows_tolerance(*cache) + 1e-4) * mag;
  std::printf("[ %s ] attention vs f32 on outlier keys: max err / max |out| = %.4g (storing changed exact attention "
              "by %.4g, allowed %.4g)\n", GetParam().c_str(), err / mag, quant_err / mag, allowed / mag);
  EXPECT_LE(err, allowed);
}

INSTANTIATE_TEST_SUITE_P(Registered, EveryMethod, ::testing::ValuesIn(method_names()),
                         [](const auto& info) { return info.param; });
// The other integer-dot rounding of the tiled codecs (2-bit codes default to dot=8, 4-bit
// to dot=16: intt::default_dot_bits) through the same checks.
INSTANTIATE_TEST_SUITE_P(OtherDot, EveryMethod,
                         ::testing::Values("int2:dot=16", "int4:dot=8", "kivi2:dot=16", "akvq_vl:dot=16", "akvq_vl:dot=8"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

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
