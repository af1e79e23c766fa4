// Shared helpers of the kv tests: random data, the SIMD levels this CPU has, and a
// plain double-precision softmax attention reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "kv/codec.h"
#include "kv/kv_cache.h"

namespace vlkv::kvtest {

// A cache with 4 KiB pages (streams cross page boundaries early), 64 MiB by default;
// null (and a test failure) when the method or geometry is refused.
inline std::unique_ptr<KvCache> small_page_cache(const std::string& method, const KvGeometry& g,
                                                 uint64_t budget_bytes = 64ull << 20) {
  KvCacheConfig kc;
  kc.geometry = g;
  kc.method = method;
  kc.page_bytes = 4096;
  kc.budget_bytes = budget_bytes;
  auto c = KvCache::create(kc);
  EXPECT_TRUE(c.is_ok()) << method << ": " << c.status().message();
  return c.is_ok() ? std::move(*c) : nullptr;
}

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

// Every SIMD level the CPU supports (always kScalar).
inline std::vector<SimdLevel> simd_levels() { return supported_simd_levels(); }

// Every SIMD dispatch tier the CPU supports, kScalar first (avx2 without and with
// AVX-VNNI, avx512 without and with VNNI): loop over these to reach every kernel variant.
inline std::vector<SimdTier> simd_tiers() { return supported_simd_tiers(); }

// Whether the integer codecs' tile kernels (int_kernels.h) exist at a tier: every tier but
// scalar (x86: avx2 .. avx512vnni; ARM64: neon, dotprod, i8mm).
inline bool integer_kv_kernels_at(SimdTier tier) { return tier != SimdTier::kScalar; }

// Restores the SIMD tier a test found when it ends.
struct SimdLevelGuard {
  SimdTier saved = simd_tier();
  ~SimdLevelGuard() { set_simd_tier_for_testing(saved); }
};

// One query row attending over keys/values in double precision.
//   q: [d]; keys, vals: [n, d] (row stride d); out: [d]
// With base ([n]) and qb ([d]) given, key t is scored with qb where base[t] is set
// (per-key query choice: logit_t = scale * (base[t] ? qb : q) . key_t).
inline void ref_attention_row(const float* q, const float* keys, const float* vals, int64_t n, int d, double scale,
                              double* out, const float* qb = nullptr, const uint8_t* base = nullptr) {
  std::vector<double> s(n);
  double mx = -INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    const float* qq = base && base[t] ? qb : q;
    double acc = 0;
    for (int i = 0; i < d; ++i) acc += static_cast<double>(qq[i]) * keys[t * d + i];
    s[t] = acc * scale;
    mx = std::max(mx, s[t]);
  }
  double l = 0;
  for (auto& e : s) l += (e = std::exp(e - mx));
  std::fill(out, out + d, 0.0);
  for (int64_t t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i) out[i] += s[t] / l * vals[t * d + i];
}

// max_i |a_i - b_i| / max(max_i |b_i|, floor)
inline double rel_err(const float* a, const double* b, int d, double floor = 1e-3) {
  double err = 0, mag = floor;
  for (int i = 0; i < d; ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    mag = std::max(mag, std::abs(b[i]));
  }
  return err / mag;
}


// Encodes x [n, d] (n a multiple of the codec's tokens_per_block) into pages of
// blocks_per_page blocks, starting skip_blocks blocks into the first page, and returns
// the pages with a SegmentView over them. slack_bytes pads each page (0 lets ASan catch
// a kernel reading past a page's last block).
struct PagedCodes {
  std::vector<std::vector<uint8_t>> pages;  // [n_pages][blocks_per_page * block_bytes + slack]
  std::vector<const uint8_t*> ptrs;
  SegmentView view;
};

inline PagedCodes encode_paged(const Codec& c, const std::vector<float>& x /*[n, d]*/, int n, int d,
                               int blocks_per_page, int skip_blocks, int slack_bytes) {
  PagedCodes p;
  const int tpb = c.tokens_per_block();
  const int64_t bb = c.block_bytes(d);
  const int n_pages = (n / tpb + skip_blocks + blocks_per_page - 1) / blocks_per_page;
  p.pages.assign(n_pages, std::vector<uint8_t>(blocks_per_page * bb + slack_bytes));
  for (auto& pg : p.pages) p.ptrs.push_back(pg.data());
  for (int b = 0; b < n / tpb; ++b) {
    const int g = b + skip_blocks;
    c.encode(&x[static_cast<size_t>(b) * tpb * d], d, d, p.pages[g / blocks_per_page].data() + (g % blocks_per_page) * bb);
  }
  p.view.pages = p.ptrs.data();
  p.view.first_block = skip_blocks;
  p.view.n_tokens = n;
  p.view.blocks_per_page = blocks_per_page;
  p.view.block_bytes = static_cast<int32_t>(bb);
  p.view.tokens_per_block = tpb;
  p.view.head_dim = d;
  return p;
}

}  // namespace vlkv::kvtest
