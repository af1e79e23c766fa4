// Fused decode attention: the blocked f32/f16 kernels (register-blocked row groups,
// 64-token sub-blocks, 4x4 reduce trees) against the scalar reference at every SIMD
// level over shapes that hit every remainder path; and attend_layer (vectorized
// softmax, byte-balanced flash-decoding splits, causal new tokens) against a double
// precision reference at every level, 1 and 2 threads, decode and prefill (prefill steps
// of >= 16 tokens through the GEMM path of attention_gemm.h).
#include "kv/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "base/fp16.h"

#include "kv/codec_registry.h"
#include "kv/method_registry.h"
#include "kv/page_table.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

// n rows of codec c in pages of blocks_per_page blocks, the view starting skip blocks in.
struct Paged {
  std::vector<std::vector<uint8_t>> pages;
  std::vector<const uint8_t*> ptrs;
  SegmentView view;
};

Paged build(const Codec& c, const std::vector<float>& x, int n, int d, int blocks_per_page, int skip) {
  Paged p;
  const int64_t bb = c.block_bytes(d);
  const int n_pages = (n + skip + blocks_per_page - 1) / blocks_per_page;
  p.pages.assign(n_pages, std::vector<uint8_t>(blocks_per_page * bb + 64));
  for (auto& pg : p.pages) p.ptrs.push_back(pg.data());
  for (int b = 0; b < n; ++b) {
    const int g = b + skip;
    c.encode(&x[static_cast<size_t>(b) * d], d, d, p.pages[g / blocks_per_page].data() + (g % blocks_per_page) * bb);
  }
  p.view.pages = p.ptrs.data();
  p.view.first_block = skip;
  p.view.n_tokens = n;
  p.view.blocks_per_page = blocks_per_page;
  p.view.block_bytes = static_cast<int32_t>(bb);
  p.view.tokens_per_block = 1;
  p.view.head_dim = d;
  return p;
}

TEST(FloatKernels, BlockedPathsMatchScalarOnEveryShape) {
  kvtest::SimdLevelGuard guard;
  for (const char* name : {"f32", "f16"}) {
    auto codec = make_codec(name);
    ASSERT_TRUE(codec.is_ok());
    const Codec& c = **codec;
    for (int d : {8, 16, 24, 32, 48, 64, 80, 128, 136}) {
      for (int n_q : {1, 2, 3, 4, 5, 6, 8, 9}) {
        for (int n : {1, 3, 4, 7, 64, 65, 131, 300}) {
          const auto x = random_vec(static_cast<size_t>(n) * d, n * 7 + d, -2.0f, 2.0f);
          const auto q = random_vec(static_cast<size_t>(n_q) * d, n_q + d, -2.0f, 2.0f);
          const auto p = random_vec(static_cast<size_t>(n_q) * (n + 5), n + n_q, 0.0f, 1.0f);
          Paged pg = build(c, x, n, d, /*blocks_per_page=*/37, /*skip=*/5);
          const int64_t ld = n + 5;
          std::vector<std::vector<float>> logits, outs;
          for (SimdLevel level : kvtest::simd_levels()) {
            set_simd_level_for_testing(level);
            std::vector<float> l(static_cast<size_t>(n_q) * ld, -7.0f);
            c.scores(q.data(), n_q, pg.view, 0.3f, l.data(), ld);
            std::vector<float> o = random_vec(static_cast<size_t>(n_q) * d, 99, -1.0f, 1.0f);  // accumulates into
            c.accumulate(p.data(), ld, n_q, pg.view, o.data());
            logits.push_back(std::move(l));
            outs.push_back(std::move(o));
          }
          for (size_t lv = 1; lv < logits.size(); ++lv) {
            for (int r = 0; r < n_q; ++r) {
              for (int64_t t = 0; t < ld; ++t) {
                const float a = logits[lv][r * ld + t], b = logits[0][r * ld + t];
                if (t >= n) {
                  ASSERT_EQ(a, -7.0f) << "scores wrote past n_tokens: " << name << " d=" << d << " n_q=" << n_q;
                  continue;
                }
                ASSERT_NEAR(a, b, 2e-5 * (1.0 + std::abs(b)) * std::sqrt(static_cast<double>(d)))
                    << name << " level " << lv << " d=" << d << " n_q=" << n_q << " n=" << n << " r=" << r
                    << " t=" << t;
              }
              for (int i = 0; i < d; ++i) {
                const float a = outs[lv][r * d + i], b = outs[0][r * d + i];
                ASSERT_NEAR(a, b, 2e-5 * (1.0 + std::abs(b)) * std::sqrt(static_cast<double>(n)))
                    << name << " level " << lv << " d=" << d << " n_q=" << n_q << " n=" << n << " r=" << r
                    << " i=" << i;
              }
            }
          }
        }
      }
    }
  }
}

// One layer filled through a method's store path, attended by attend_layer.
struct Layer {
  PagePool pool{64ull << 20, 4096};
  LayerCache cache;
  PendingStep pending;
  std::vector<float> k, v;  // [n, n_kv, d] exact inputs
};

void fill(Layer& L, const Method& m, const KvGeometry& g, int64_t n, uint32_t seed) {
  L.cache.heads.resize(g.n_kv_heads);
  L.k = random_vec(static_cast<size_t>(n) * g.n_kv_heads * g.head_dim, seed, -2.0f, 2.0f);
  L.v = random_vec(L.k.size(), seed + 1, -1.0f, 1.0f);
  LayerEditor ed(L.pool, L.cache, L.pending, 0, g.head_dim);
  for (int64_t t = 0; t < n;) {  // uneven store chunks
    const int64_t c = std::min<int64_t>(n - t, 1 + (t * 7 + 13) % 97);
    StoreInput in;
    in.n_cached = t;
    in.n_new = static_cast<int>(c);
    in.k = L.k.data() + t * g.n_kv_heads * g.head_dim;
    in.v = L.v.data() + t * g.n_kv_heads * g.head_dim;
    ASSERT_TRUE(m.store(in, ed).is_ok());
    t += c;
  }
  L.cache.n_tokens = n;
}

TEST(AttendLayer, MatchesDoubleReferenceAtEveryLevelAndThreadCount) {
  kvtest::SimdLevelGuard guard;
  ThreadPool pool1(1), pool2(2);
  struct Case {
    int n_heads, n_kv, d;
    int64_t ctx;
    int n_new;
  };
  const Case cases[] = {{8, 2, 128, 1100, 1}, {8, 2, 64, 3, 1},   {4, 4, 32, 700, 1}, {16, 2, 48, 520, 1},
                        {6, 2, 80, 257, 1},   {8, 2, 128, 0, 9},  {4, 2, 64, 300, 37}, {8, 1, 16, 90, 130},
                        {2, 2, 8, 40, 3},
                        // prefill through the GEMM path (attention_gemm.h): several 128-row tiles, the
                        // last partial; the first step size that takes it; cached keys past a chunk
                        {16, 2, 128, 600, 70}, {8, 2, 64, 257, 16}};
  for (const char* method_name : {"f32", "f16"}) {
    for (const Case& cs : cases) {
      const KvGeometry g{1, cs.n_heads, cs.n_kv, cs.d};
      auto method = create_method(method_name, g);
      ASSERT_TRUE(method.is_ok());
      Layer L;
      fill(L, **method, g, cs.ctx, static_cast<uint32_t>(cs.ctx + cs.d));
      auto f32 = make_codec("f32");
      const int d = cs.d, group = cs.n_heads / cs.n_kv;
      const auto q = random_vec(static_cast<size_t>(cs.n_new) * cs.n_heads * d, 5, -2.0f, 2.0f);
      const auto kn = random_vec(static_cast<size_t>(cs.n_new) * cs.n_kv * d, 6, -2.0f, 2.0f);
      const auto vn = random_vec(kn.size(), 7, -1.0f, 1.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      // Reference over stored (read back) + new rows, per query row.
      std::vector<double> ref(q.size());
      for (int h = 0; h < cs.n_kv; ++h) {
        std::vector<float> keys, vals;
        for (int64_t t = 0; t < cs.ctx; ++t) {
          // the f16 method rounds: use what it stores
          std::vector<float> kr(d), vr(d);
          for (int i = 0; i < d; ++i) {
            kr[i] = L.k[(t * cs.n_kv + h) * d + i];
            vr[i] = L.v[(t * cs.n_kv + h) * d + i];
          }
          keys.insert(keys.end(), kr.begin(), kr.end());
          vals.insert(vals.end(), vr.begin(), vr.end());
        }
        if (std::string(method_name) == "f16") {
          for (auto& e : keys) e = fp16_to_fp32(fp32_to_fp16(e));
          for (auto& e : vals) e = fp16_to_fp32(fp32_to_fp16(e));
        }
        for (int i = 0; i < cs.n_new; ++i) {
          keys.insert(keys.end(), kn.begin() + (i * cs.n_kv + h) * d, kn.begin() + (i * cs.n_kv + h + 1) * d);
          vals.insert(vals.end(), vn.begin() + (i * cs.n_kv + h) * d, vn.begin() + (i * cs.n_kv + h + 1) * d);
          for (int r = 0; r < group; ++r) {
            const int64_t row = (static_cast<int64_t>(i) * cs.n_heads + h * group + r) * d;
            kvtest::ref_attention_row(q.data() + row, keys.data(), vals.data(), cs.ctx + i + 1, d, scale,
                                      ref.data() + row);
          }
        }
      }
      for (ThreadPool* pool : {&pool1, &pool2}) {
        for (SimdLevel level : kvtest::simd_levels()) {
          set_simd_level_for_testing(level);
          std::vector<float> out(q.size(), NAN);
          attend_layer(L.cache, nullptr, **f32, q.data(), kn.data(), vn.data(), cs.n_new, scale, out.data(),
                       AttendShape{cs.n_heads, cs.n_kv, d}, *pool);
          for (size_t row = 0; row < q.size(); row += d)
            ASSERT_LT(kvtest::rel_err(out.data() + row, ref.data() + row, d), 2e-5)
                << method_name << " heads " << cs.n_heads << "/" << cs.n_kv << " d=" << d << " ctx=" << cs.ctx
                << " n_new=" << cs.n_new << " level " << static_cast<int>(level) << " threads "
                << pool->n_threads() << " row " << row / d;
        }
      }
      L.cache.for_each_page([&](PageId p) { L.pool.free(p); });
    }
  }
}

}  // namespace
}  // namespace vlkv
