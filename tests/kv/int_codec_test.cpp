// Integer and Walsh-Hadamard-rotated codecs (int_codec.cpp): packing, known-answer
// blocks, round trips within the declared bound on random and outlier-heavy data,
// fused ops vs decode() at every SIMD level (head_dim 8..128, groups, odd G), group
// refusals, the WHT itself, and rotated attention through a KvCache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/fp16.h"
#include "kv/codec_registry.h"
#include "kv/codecs/int_pack.h"
#include "kv/codecs/wht.h"
#include "kv/kv_cache.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

std::shared_ptr<const Codec> codec(const std::string& spec) {
  auto c = make_codec(spec);
  EXPECT_TRUE(c.is_ok()) << spec << ": " << c.status().message();
  return c.is_ok() ? *c : nullptr;
}

// Random data with a few outlier channels (x30) and one outlier token (x10).
std::vector<float> outlier_data(int n, int d, uint32_t seed) {
  std::vector<float> x = random_vec(static_cast<size_t>(n) * d, seed, -1.0f, 1.0f);
  for (int t = 0; t < n; ++t) {
    x[static_cast<size_t>(t) * d + 3 % d] *= 30.0f;
    x[static_cast<size_t>(t) * d + (d - 2)] *= 30.0f;
  }
  for (int i = 0; i < d; ++i) x[static_cast<size_t>(n / 2) * d + i] *= 10.0f;
  return x;
}

TEST(IntPack, RowRoundTripEveryWidth) {
  for (int bits : {2, 3, 4, 8})
    for (int d : {8, 16, 24, 32, 40, 64, 128}) {
      std::vector<uint8_t> codes(d), back(d);
      std::mt19937 rng(bits * 1000 + d);
      for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1));
      std::vector<uint8_t> packed(intq::row_bytes(d, bits));
      intq::pack_row(codes.data(), d, bits, packed.data());
      intq::unpack_row(packed.data(), d, bits, back.data());
      EXPECT_EQ(codes, back) << bits << " " << d;
    }
}

TEST(IntPack, F16DirectedRounding) {
  for (float x : {0.1f, -0.1f, 1.0f / 3, -1.0f / 3, 1e-6f, -1e-6f, 1e-9f, -1e-9f, 0.0f, 70000.0f, -70000.0f}) {
    const float xc = std::clamp(x, -65504.0f, 65504.0f);  // metadata saturates at the f16 range
    EXPECT_LE(fp16_to_fp32(intq::f16_round_down(x)), xc) << x;
    EXPECT_GE(fp16_to_fp32(intq::f16_round_up(x)), xc) << x;
    EXPECT_LE(std::abs(fp16_to_fp32(intq::f16_round_down(x)) - xc), std::abs(xc) * 0x1p-10 + 0x1p-24) << x;
    EXPECT_LE(std::abs(fp16_to_fp32(intq::f16_round_up(x)) - xc), std::abs(xc) * 0x1p-10 + 0x1p-24) << x;
  }
}

// Known answer: int4, d = 32, one group, x = (i % 16) / 2 - 1: min -1, scale 0.5, code i % 16.
TEST(IntCodec, KnownAnswerInt4Block) {
  auto c = codec("int4:g=32");
  const int d = 32;
  std::vector<float> x(d);
  for (int i = 0; i < d; ++i) x[i] = (i % 16) * 0.5f - 1.0f;
  ASSERT_EQ(c->block_bytes(d), 4 + 16);
  std::vector<uint8_t> b(c->block_bytes(d));
  c->encode(x.data(), d, d, b.data());
  EXPECT_EQ(b[0] | (b[1] << 8), 0x3800);  // scale 0.5
  EXPECT_EQ(b[2] | (b[3] << 8), 0xBC00);  // min -1
  for (int u = 0; u < 2; ++u)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(b[4 + 8 * u + j], j | ((j + 8) << 4)) << j;
  std::vector<float> y(d);
  c->decode(b.data(), d, y.data());
  EXPECT_EQ(x, y);
}

// Known answer: int2 and int3 codes laid out as int_pack.h documents; int2c per channel.
TEST(IntCodec, KnownAnswerInt2Int3AndPerChannel) {
  const int d = 16;
  std::vector<float> x(d);
  for (int i = 0; i < d; ++i) x[i] = static_cast<float>(i % 8);  // min 0, max 7
  {
    auto c = codec("int3:g=16");
    std::vector<uint8_t> b(c->block_bytes(d));
    ASSERT_EQ(b.size(), 4u + 6u);
    c->encode(x.data(), d, d, b.data());
    EXPECT_EQ(b[0] | (b[1] << 8), 0x3C00);  // scale 1
    EXPECT_EQ(b[2] | (b[3] << 8), 0x0000);  // min 0
    // low 2 bits: byte j holds codes j, j+4, j+8, j+12 -> (j, j+4, j, j+4) & 3
    for (int j = 0; j < 4; ++j) EXPECT_EQ(b[4 + j], (j & 3) | (((j + 4) & 3) << 2) | ((j & 3) << 4) | (((j + 4) & 3) << 6));
    EXPECT_EQ(b[8], 0xF0);  // bit 2 set for codes 4..7 and 12..15
    EXPECT_EQ(b[9], 0xF0);
    std::vector<float> y(d);
    c->decode(b.data(), d, y.data());
    EXPECT_EQ(x, y);
  }
  {
    auto c = codec("int2c:G=4");
    const int dd = 8;
    std::vector<float> blk(4 * dd);
    for (int t = 0; t < 4; ++t)
      for (int i = 0; i < dd; ++i) blk[t * dd + i] = static_cast<float>(t + i);  // channel i: min i, scale 1
    ASSERT_EQ(c->block_bytes(dd), 4 * dd + 4 * 2);
    std::vector<uint8_t> b(c->block_bytes(dd));
    c->encode(blk.data(), dd, dd, b.data());
    for (int i = 0; i < dd; ++i) {
      EXPECT_EQ(b[2 * i] | (b[2 * i + 1] << 8), 0x3C00);
      EXPECT_EQ(fp16_to_fp32(static_cast<uint16_t>(b[2 * dd + 2 * i] | (b[2 * dd + 2 * i + 1] << 8))), static_cast<float>(i));
    }
    for (int t = 0; t < 4; ++t)  // token t: code t in every channel; byte j holds channels j, j+2, j+4, j+6
      for (int j = 0; j < 2; ++j) EXPECT_EQ(b[4 * dd + 2 * t + j], t * 0x55);
    std::vector<float> y(4 * dd);
    c->decode(b.data(), dd, y.data());
    EXPECT_EQ(blk, y);
  }
}

TEST(IntCodec, BitsPerElementIncludeMetadata) {
  const int d = 128;
  EXPECT_DOUBLE_EQ(codec("int8")->bits_per_element(d), 9.0);
  EXPECT_DOUBLE_EQ(codec("int4")->bits_per_element(d), 5.0);
  EXPECT_DOUBLE_EQ(codec("int4:g=64")->bits_per_element(d), 4.5);
  EXPECT_DOUBLE_EQ(codec("int4:g=128")->bits_per_element(d), 4.25);
  EXPECT_DOUBLE_EQ(codec("int4:g=0")->bits_per_element(d), 4.25);
  EXPECT_DOUBLE_EQ(codec("int3")->bits_per_element(d), 4.0);
  EXPECT_DOUBLE_EQ(codec("int2")->bits_per_element(d), 3.0);
  EXPECT_DOUBLE_EQ(codec("int2c")->bits_per_element(d), 3.0);
  EXPECT_DOUBLE_EQ(codec("int4c:G=64")->bits_per_element(d), 4.5);
  EXPECT_DOUBLE_EQ(codec("wht_int2:g=128")->bits_per_element(d), 2.25);
}

TEST(IntCodec, RefusesGroupsAndHeadDimsItCannotStore) {
  Status st = codec("int4:g=32")->check_head_dim(8);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("int4: group size 32 does not divide head_dim 8"), std::string::npos) << st.message();
  EXPECT_FALSE(codec("int4:g=64")->check_head_dim(96).is_ok());
  EXPECT_TRUE(codec("int4:g=32")->check_head_dim(96).is_ok());
  EXPECT_FALSE(codec("int2:g=0")->check_head_dim(36).is_ok());  // not a multiple of 8
  st = codec("wht_int4:g=0")->check_head_dim(96);
  EXPECT_NE(st.message().find("power of two"), std::string::npos) << st.message();
  EXPECT_TRUE(codec("wht_int4:g=0")->check_head_dim(64).is_ok());
  auto bad = make_codec("int4:g=12");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("multiple of 8"), std::string::npos);
  EXPECT_FALSE(make_codec("int4:clip=1.5").is_ok());
  EXPECT_FALSE(make_codec("int5").is_ok());
  EXPECT_FALSE(make_codec("int2c:g=32").is_ok());  // per-channel takes G
}

const char* kSpecs[] = {"int8", "int4", "int3", "int2", "int8:g=0", "int4:g=64", "int2:g=128,clip=0.8",
                        "int4:clip=0.9", "int8c", "int4c", "int3c:G=16", "int2c:G=5", "int2c:G=32,clip=0.8",
                        "wht_int4:g=0", "wht_int2:g=32", "wht_int8", "wht_int2c", "wht_int4c:G=8",
                        // tiled layouts (integer dots at every tier but scalar)
                        "int2:layout=k", "int2:layout=v", "int4:g=64,layout=k", "int4:layout=v", "int8:layout=k",
                        "int8:g=16,layout=v", "int2c:G=64", "int8c:G=16", "wht_int2:g=128,layout=v",
                        "wht_int4c:G=32", "int2c:G=32,dot=8", "int4:layout=v,dot=8", "int2:layout=k,dot=8", "int2:layout=v,dot=8", "int4:layout=k,dot=8",
                        // akvq_vl's tiled classes: rotated, clipped, one group per head at d128
                        "wht_int2:g=128,clip=0.8,layout=k", "wht_int4:g=64,layout=k", "wht_int4:g=0,layout=v",
                        // 8-bit tiles (int8 / zipvl hi=8 / akvq_vl text_bits=8): integer dots like 2/4 bits
                        "int8:layout=v", "int8:layout=k,dot=8", "int8c:G=32,dot=8", "int8:g=64,layout=v,dot=8",
                        "wht_int8:g=128,layout=k"};

TEST(IntCodec, RoundTripWithinBoundRandomAndOutliers) {
  for (const char* spec : kSpecs) {
    auto c = codec(spec);
    for (int d : {8, 16, 32, 64, 128}) {
      if (!c->check_head_dim(d).is_ok()) continue;
      const int tpb = c->tokens_per_block();
      for (int kind = 0; kind < 2; ++kind) {
        const int n = tpb * 3;
        const std::vector<float> x = kind ? outlier_data(n, d, 11 + d) : random_vec(static_cast<size_t>(n) * d, 7 + d, -3.0f, 3.0f);
        std::vector<uint8_t> b(c->block_bytes(d));
        std::vector<float> y(static_cast<size_t>(tpb) * d);
        for (int blk = 0; blk < 3; ++blk) {
          const float* xb = &x[static_cast<size_t>(blk) * tpb * d];
          c->encode(xb, d, d, b.data());
          c->decode(b.data(), d, y.data());
          double mx = 0;
          for (int i = 0; i < tpb * d; ++i) mx = std::max(mx, static_cast<double>(std::abs(xb[i])));
          const double bound = c->error_bound_at(d);
          EXPECT_LE(bound, c->error_bound());
          for (int i = 0; i < tpb * d; ++i)
            ASSERT_LE(std::abs(y[i] - xb[i]), bound * mx + 0x1p-24) << spec << " d=" << d << " kind=" << kind << " i=" << i;
        }
      }
    }
  }
}

// RMS error of a fused op over its reference, relative to the reference's RMS, at the
// rounding its kernels declare (Codec::fused_rounding: 0 = f32 inputs): ~6e-4 measured at
// 15/14 bits; at 8/7 bits ~2.5e-2 on outlier data (their scales stretch the query step) and
// up to 8.6e-2 for 7-bit probabilities on uniform values, whose sums over ~48 tokens cancel.
double rms_tolerance(int bits) { return bits >= 14 ? 1.5e-3 : bits > 0 ? 0.12 : 1e-5; }

// Fused ops of c against decode() of the stored bytes in double (a plain dot / axpy, not the
// kernels), at every SIMD tier the CPU has (scalar, avx2, avx2vnni, avx512, avx512vnni: each
// kernel variant of int_kernels.h), with the rotation hooks.
//   x: [n, d] (n a multiple of tokens_per_block), q: [n_q, d], p: [n_q, n] >= 0
void expect_fused_ops_match_decode(const Codec& c, const char* spec, int d, int n, int n_q, int kind,
                                   const std::vector<float>& x, const std::vector<float>& q, const std::vector<float>& p) {
  const int tpb = c.tokens_per_block(), nb = n / tpb;
  // 3 blocks per page, view starting at block 2 of the first page, 7 bytes of page slack.
  const kvtest::PagedCodes paged = kvtest::encode_paged(c, x, n, d, /*blocks_per_page=*/3, /*skip_blocks=*/2, 7);
  const SegmentView& v = paged.view;
  std::vector<float> dec(static_cast<size_t>(n) * d);
  for (int b = 0; b < nb; ++b) c.decode(v.block(b), d, &dec[static_cast<size_t>(b) * tpb * d]);
  std::vector<double> ref_s(static_cast<size_t>(n_q) * n), mag_s(ref_s.size()), ref_o(static_cast<size_t>(n_q) * d),
      mag_o(ref_o.size(), 1e-6);
  for (int r = 0; r < n_q; ++r)
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < d; ++i) {
        const double kv = dec[static_cast<size_t>(t) * d + i];
        ref_s[r * n + t] += q[r * d + i] * kv;
        mag_s[r * n + t] += std::abs(q[r * d + i] * kv);
        ref_o[r * d + i] += p[r * n + t] * kv;
        mag_o[r * d + i] += std::abs(p[r * n + t] * kv);
      }
    }
  // Inputs rounded (Codec::fused_rounding): the bounds int_tile_kernels_avx512.h derives,
  // 15-bit queries: |dq'| <= step/2 per channel (step = max|q'| / 16383 over the rows) times codes
  // <= 2^B - 1, with (2^B - 1) * scale <= 2.02 max|x| over the block; p' = p * scale to 14
  // (dot=8: 7) bits: step = max p' / 16383 over 64 tokens times codes <= 2^B - 1. Stored basis.
  std::vector<float> dec_st = dec;  // decoded rows in the stored (maybe rotated) basis
  if (c.query_transform()) wht_rows(dec_st.data(), n, d);
  std::vector<double> max_k(nb, 0.0);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i)
      max_k[t / tpb] = std::max<double>(max_k[t / tpb], std::abs(dec_st[static_cast<size_t>(t) * d + i]));
  const double max_all = *std::max_element(max_k.begin(), max_k.end());
  for (SimdTier tier : kvtest::simd_tiers()) {
    set_simd_tier_for_testing(tier);
    const char* level = simd_tier_name(tier);
    const Codec::FusedRounding rounding = c.fused_rounding(d);
    std::vector<float> qt = q;
    if (c.query_transform()) c.transform_query(qt.data(), n_q, d);
    std::vector<float> logits(static_cast<size_t>(n_q) * (n + 1), -7.0f);
    c.scores(qt.data(), n_q, v, 1.0f, logits.data(), n + 1);
    std::vector<float> out(static_cast<size_t>(n_q) * d, 0.0f);
    c.accumulate(p.data(), n, n_q, v, out.data());
    if (c.output_transform()) c.untransform_output(out.data(), n_q, d);
    double err2_s = 0, ref2_s = 0, err2_o = 0, ref2_o = 0;
    double max_q = 0;  // over every row: per-channel blocks share one query step
    for (float e : qt) max_q = std::max<double>(max_q, std::abs(e));
    for (int r = 0; r < n_q; ++r) {
      double max_p = 0;
      for (int t = 0; t < n; ++t) max_p = std::max<double>(max_p, p[r * n + t]);
      for (int t = 0; t < n; ++t) {
        // f32 sums over <= 128 terms (+ the rotation's d log d adds): 1e-5 of the magnitudes.
        const double q_levels = rounding.query_bits == 8 ? 254 : 32766;  // 2 * max |qi|
        const double tol = rounding.query_bits ? d * max_q * 2.02 * max_k[t / tpb] / q_levels + 1e-4
                                   : 2e-5 * mag_s[r * n + t] + 1e-5;
        const double e = logits[r * (n + 1) + t] - ref_s[r * n + t];
        ASSERT_LE(std::abs(e), tol) << spec << " " << level << " d=" << d << " n_q=" << n_q << " kind=" << kind << " t=" << t;
        err2_s += e * e;
        ref2_s += ref_s[r * n + t] * ref_s[r * n + t];
      }
      ASSERT_EQ(logits[r * (n + 1) + n], -7.0f);
      for (int i = 0; i < d; ++i) {
        // rotated values: the error spreads over the head (|H| rows have norm 1): sqrt(d).
        const double p_levels = rounding.prob_bits == 7 ? 254 : 32766;  // 2 * max pq (7 / 14 bits)
        const double tol = rounding.prob_bits ? n * max_p * 2.02 * max_all / p_levels * (c.output_transform() ? std::sqrt(d) : 1.0) + 1e-4
                                   : 2e-5 * mag_o[r * d + i] + 1e-5;
        const double e = out[r * d + i] - ref_o[r * d + i];
        ASSERT_LE(std::abs(e), tol) << spec << " " << level << " d=" << d << " n_q=" << n_q << " kind=" << kind << " i=" << i;
        err2_o += e * e;
        ref2_o += ref_o[r * d + i] * ref_o[r * d + i];
      }
    }
    // The RMS error stays far below the worst case (rms_tolerance).
    EXPECT_LE(std::sqrt(err2_s), rms_tolerance(rounding.query_bits) * std::sqrt(ref2_s)) << spec << " " << level << " d=" << d << " n_q=" << n_q;
    EXPECT_LE(std::sqrt(err2_o), rms_tolerance(rounding.prob_bits) * std::sqrt(ref2_o)) << spec << " " << level << " d=" << d << " n_q=" << n_q;
  }
}

// At head_dim 64 and 128: random and outlier-heavy data, n_q = 1, 3, 4, 6 query rows per KV
// head (GQA ratios); other head dims: outliers, 5 rows.
TEST(IntCodec, FusedOpsMatchDecodeAtEverySimdLevel) {
  kvtest::SimdLevelGuard guard;
  for (const char* spec : kSpecs) {
    auto c = codec(spec);
    for (int d : {8, 24, 32, 64, 128})
    for (int kind : {0, 1})
    for (int n_q : {1, 3, 4, 5, 6}) {
      if (!c->check_head_dim(d).is_ok()) continue;
      const bool wide_sweep = d == 64 || d == 128;
      if (wide_sweep ? n_q == 5 : (n_q != 5 || kind == 0)) continue;
      const int tpb = c->tokens_per_block(), n = tpb * (45 / tpb + 1);
      const std::vector<float> x = kind ? outlier_data(n, d, 3 + d + n_q)
                                        : random_vec(static_cast<size_t>(n) * d, 17 + d + n_q, -3.0f, 3.0f);
      expect_fused_ops_match_decode(*c, spec, d, n, n_q, kind, x, random_vec(static_cast<size_t>(n_q) * d, 5, -2.0f, 2.0f),
                                    random_vec(static_cast<size_t>(n_q) * n, 6, 0.0f, 1.0f));
    }
  }
}

// Softmax weights far below the running max (a 64-token run at 1e-40, denormal, next to
// weights of 1) and a query piece of 1e-38: the rounding steps' inverses would overflow to
// inf, and p * inf made the rounded codes and the dot=8 residuals NaN (int2:dot=8 turned a
// whole decode into NaN). Such inputs now round to 0; outputs stay within 1e-5 of decode().
TEST(IntCodec, TinyProbabilitiesAndQueriesStayFinite) {
  kvtest::SimdLevelGuard guard;
  for (const char* spec : {"int2:layout=v,dot=8", "int4:layout=v,dot=8", "int2:layout=v", "int2:layout=k,dot=8",
                           "int4:layout=k", "int2c:G=32,dot=8", "int2c:G=32", "int4:layout=k,dot=8",
                           "int8:layout=v,dot=8", "int8:layout=k", "int8c:G=32,dot=8"}) {
    auto c = codec(spec);
    const int d = 64, n = 128, tpb = c->tokens_per_block(), nb = n / tpb, n_q = 2;
    const int64_t bb = c->block_bytes(d);
    const std::vector<float> x = random_vec(static_cast<size_t>(n) * d, 41, -1.0f, 1.0f);
    std::vector<uint8_t> page(static_cast<size_t>(nb) * bb);
    std::vector<float> dec(static_cast<size_t>(n) * d);
    for (int b = 0; b < nb; ++b) {
      c->encode(&x[static_cast<size_t>(b) * tpb * d], d, d, &page[static_cast<size_t>(b) * bb]);
      c->decode(&page[static_cast<size_t>(b) * bb], d, &dec[static_cast<size_t>(b) * tpb * d]);
    }
    if (c->query_transform()) wht_rows(dec.data(), n, d);
    const uint8_t* pages[1] = {page.data()};
    SegmentView v;
    v.pages = pages;
    v.n_tokens = n;
    v.blocks_per_page = nb;
    v.block_bytes = static_cast<int32_t>(bb);
    v.tokens_per_block = tpb;
    v.head_dim = d;
    // Row 0: weights 1 on tokens [0, 64), 1e-40 on [64, 128); row 1: 1e-40 everywhere but token 5.
    std::vector<float> p(static_cast<size_t>(n_q) * n, 1e-40f);
    for (int t = 0; t < 64; ++t) p[t] = 1.0f;
    p[n + 5] = 1.0f;
    // Row 0: a normal query; row 1: 1e-38 on every channel.
    std::vector<float> q = random_vec(static_cast<size_t>(n_q) * d, 43, -1.0f, 1.0f);
    for (int i = 0; i < d; ++i) q[d + i] = 1e-38f;
    for (SimdTier tier : kvtest::simd_tiers()) {
      set_simd_tier_for_testing(tier);
      std::vector<float> out(static_cast<size_t>(n_q) * d, 0.0f), logits(static_cast<size_t>(n_q) * n);
      c->accumulate(p.data(), n, n_q, v, out.data());
      c->scores(q.data(), n_q, v, 1.0f, logits.data(), n);
      for (int r = 0; r < n_q; ++r) {
        for (int i = 0; i < d; ++i) {
          double ref = 0;
          for (int t = 0; t < n; ++t) ref += static_cast<double>(p[r * n + t]) * dec[static_cast<size_t>(t) * d + i];
          // 64 weights of 1 rounded to 7 bits: <= 64 * step/2 * 3 with step = max|v| / 127 (~0.8 at 2 bits).
          const double tol = 64 * 1.5 * 3.0 / 127 + 1e-5;
          ASSERT_TRUE(std::isfinite(out[r * d + i])) << spec << " " << simd_tier_name(tier) << " row " << r;
          ASSERT_NEAR(out[r * d + i], ref, r == 0 ? tol : 1e-2) << spec << " " << simd_tier_name(tier) << " row " << r;
        }
        for (int t = 0; t < n; ++t) {
          ASSERT_TRUE(std::isfinite(logits[r * n + t])) << spec << " " << simd_tier_name(tier) << " row " << r;
          if (r == 1) {
            ASSERT_NEAR(logits[r * n + t], 0.0, 1e-30) << spec << " " << simd_tier_name(tier);
          }
        }
      }
    }
  }
}

// 8-bit tiles at the edge of their exactness claims (int_tile_kernels_avx512.h, intt::kMaxDotChannels8):
// codes 0 and 255 only (one channel in 16 at its group's min, the rest at the max, per token
// and per channel), queries all at full scale with one sign (15-bit parts 127 / 127, or
// -128 / 1), probabilities all 1 over more than one 64-token run. head_dim 512: one query
// step over 512 channels (the largest exact piece: |int32 sums| up to 512 * 255 * 16383);
// 528: 8-bit key tiles beyond it dequantize (scores without input rounding).
std::vector<float> full_scale_codes(int n, int d) {
  std::vector<float> x(static_cast<size_t>(n) * d);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i) x[static_cast<size_t>(t) * d + i] = (t + i) % 16 == 0 ? -1.0f : 1.0f;
  return x;
}
const char* kFullScale8[] = {"int8:g=0,layout=k", "int8:g=0,layout=k,dot=8", "int8c:G=32", "int8c:G=32,dot=8",
                             "int8:g=0,layout=v", "int8:g=16,layout=v,dot=8"};

TEST(IntCodec, EightBitTilesAtFullScaleMatchDecodeAtEverySimdLevel) {
  kvtest::SimdLevelGuard guard;
  for (const char* spec : kFullScale8)
    for (int d : {128, 512, 528})
      for (float sign : {1.0f, -1.0f}) {
        auto c = codec(spec);
        const int tpb = c->tokens_per_block(), n = tpb * (80 / tpb + 1), n_q = 4;
        expect_fused_ops_match_decode(*c, spec, d, n, n_q, 2, full_scale_codes(n, d),
                                      std::vector<float>(static_cast<size_t>(n_q) * d, 2.0f * sign),
                                      std::vector<float>(static_cast<size_t>(n_q) * n, 1.0f));
        // The integer kernels ran (they declare their rounding) wherever the claims allow them.
        const bool keys = std::string(spec).find("layout=v") == std::string::npos;
        // One query step per key over more than 512 channels: per token (g = d) or per channel at dot=16.
        const bool per_token = std::string(spec).rfind("int8:", 0) == 0;
        const bool too_wide = keys && d > 512 && (per_token || std::string(spec).find("dot=8") == std::string::npos);
        for (SimdTier tier : kvtest::simd_tiers()) {
          set_simd_tier_for_testing(tier);
          const Codec::FusedRounding r = c->fused_rounding(d);
          const bool kernel = kvtest::integer_kv_kernels_at(tier) && !too_wide;
          EXPECT_EQ((keys ? r.query_bits : r.prob_bits) != 0, kernel) << spec << " " << simd_tier_name(tier) << " d=" << d;
        }
      }
}

// The integer tile kernels of every tier (int_kernels.h: AVX2 vpmaddubsw / vpmaddwd, AVX-VNNI
// and AVX-512 VNNI vpdpbusd) round alike and sum exact integers, with the same float steps
// per lane: their outputs agree bit for bit (so one declared rounding covers them all).
// The scalar tier has no integer kernels (IntCodec's f32 path over dequantized rows, inputs
// not rounded): the first integer tier is compared with it within the RMS error of the
// rounding that tier declares (rms_tolerance), so a CPU with one SIMD tier checks it too.
//   x: [n, d], q: [n_q, d], p: [n_q, n]
void expect_tiers_agree_bit_for_bit(const Codec& c, const std::string& spec, const std::vector<SimdTier>& tiers, int d,
                                    int n, int n_q, const std::vector<float>& x, const std::vector<float>& q,
                                    const std::vector<float>& p) {
  kvtest::PagedCodes paged = kvtest::encode_paged(c, x, n, d, /*blocks_per_page=*/3, /*skip_blocks=*/1, 0);
  // The op the layout tiles (keys: scores, values: accumulate); the other one runs the f32
  // kernels over dequantized rows, whose sums differ in order across tiers.
  const bool keys = spec.find("layout=v") == std::string::npos;
  auto run = [&](SimdTier tier) {
    set_simd_tier_for_testing(tier);
    std::vector<float> logits(static_cast<size_t>(n_q) * n), out(static_cast<size_t>(n_q) * d, 0.0f);
    c.scores(q.data(), n_q, paged.view, 0.5f, logits.data(), n);
    c.accumulate(p.data(), n, n_q, paged.view, out.data());
    return keys ? logits : out;
  };
  const std::vector<float> scalar = run(SimdTier::kScalar);
  std::vector<float> first;
  for (SimdTier tier : tiers) {
    const std::vector<float> got = run(tier);
    if (!first.empty()) {
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], first[i]) << spec << " " << simd_tier_name(tier) << " d=" << d << " n_q=" << n_q;
      continue;
    }
    first = got;
    const Codec::FusedRounding rounding = c.fused_rounding(d);
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err2 += (static_cast<double>(got[i]) - scalar[i]) * (static_cast<double>(got[i]) - scalar[i]);
      ref2 += static_cast<double>(scalar[i]) * scalar[i];
    }
    EXPECT_LE(std::sqrt(err2), rms_tolerance(keys ? rounding.query_bits : rounding.prob_bits) * std::sqrt(ref2))
        << spec << " " << simd_tier_name(tier) << " vs scalar, d=" << d << " n_q=" << n_q;
  }
}

std::vector<SimdTier> simd_tiers_but_scalar() {
  std::vector<SimdTier> tiers;
  for (SimdTier t : kvtest::simd_tiers())
    if (t != SimdTier::kScalar) tiers.push_back(t);
  return tiers;
}

// See expect_tiers_agree_bit_for_bit: bit for bit across the integer tiers, within the
// declared rounding of scalar (runs on any CPU with a SIMD tier).
TEST(IntCodec, TileKernelsAgreeBitForBitAcrossTiers) {
  kvtest::SimdLevelGuard guard;
  const std::vector<SimdTier> tiers = simd_tiers_but_scalar();
  if (tiers.empty()) GTEST_SKIP() << "no SIMD tier on this CPU";
  for (const char* spec : {"int2:layout=k", "int4:g=64,layout=k", "int2c:G=64", "int4c:G=32", "int2c:G=32,dot=8",
                           "int2:layout=v", "int4:layout=v", "int4:layout=v,dot=8", "wht_int2:g=128,layout=v",
                           "int8:layout=k", "int8:g=64,layout=k,dot=8", "int8c:G=32", "int8c:G=32,dot=8",
                           "int8:layout=v", "int8:layout=v,dot=8", "wht_int8:g=128,layout=v"}) {
    auto c = codec(spec);
    for (int d : {64, 128})
      for (int n_q : {1, 3, 4, 6}) {
        if (!c->check_head_dim(d).is_ok()) continue;  // g=128 does not divide 64: no valid block (stale scratch)
        const int tpb = c->tokens_per_block(), n = tpb * (100 / tpb + 1);
        expect_tiers_agree_bit_for_bit(*c, spec, tiers, d, n, n_q, outlier_data(n, d, 70 + d),
                                       random_vec(static_cast<size_t>(n_q) * d, 71 + n_q, -2.0f, 2.0f),
                                       random_vec(static_cast<size_t>(n_q) * n, 72 + n_q, 0.0f, 1.0f));
      }
  }
  // 8-bit codes at full scale (see EightBitTilesAtFullScale...): the AVX2 s16-word totals equal
  // the VNNI paths' exact parts up to the largest piece.
  for (const char* spec : kFullScale8)
    for (float sign : {1.0f, -1.0f}) {
      auto c = codec(spec);
      const int d = 512, n_q = 4, tpb = c->tokens_per_block(), n = tpb * (80 / tpb + 1);
      expect_tiers_agree_bit_for_bit(*c, spec, tiers, d, n, n_q, full_scale_codes(n, d),
                                     std::vector<float>(static_cast<size_t>(n_q) * d, 2.0f * sign),
                                     std::vector<float>(static_cast<size_t>(n_q) * n, 1.0f));
    }
}
// wht_rows at every SIMD tier against the scalar reference wht(): the AVX2 variant does the
// same butterflies in the same order, so the outputs match bit for bit.
TEST(Wht, RowsMatchScalarReferenceBitForBitAtEveryTier) {
  kvtest::SimdLevelGuard guard;
  for (int d : {1, 4, 8, 16, 64, 128, 256}) {
    const int n = 5;
    const std::vector<float> x = random_vec(static_cast<size_t>(n) * d, 40 + d, -5.0f, 5.0f);
    std::vector<float> want = x;
    for (int r = 0; r < n; ++r) wht(&want[static_cast<size_t>(r) * d], d);
    for (SimdTier tier : kvtest::simd_tiers()) {
      set_simd_tier_for_testing(tier);
      std::vector<float> got = x;
      wht_rows(got.data(), n, d);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << simd_tier_name(tier) << " d=" << d << " i=" << i;
    }
  }
}

TEST(Wht, OrthonormalSelfInverseSylvester) {
  for (int d : {1, 2, 8, 32, 64, 128, 256}) {
    const std::vector<float> x = random_vec(d, d, -5.0f, 5.0f);
    std::vector<float> y = x;
    wht(y.data(), d);
    double nx = 0, ny = 0;
    for (int i = 0; i < d; ++i) {
      nx += static_cast<double>(x[i]) * x[i];
      ny += static_cast<double>(y[i]) * y[i];
    }
    EXPECT_NEAR(ny, nx, 1e-5 * nx);
    wht(y.data(), d);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(y[i], x[i], 1e-5 * 5 * std::sqrt(d));
  }
  // d = 4: rows of the Sylvester matrix / 2.
  float e[4] = {0, 1, 0, 0};
  wht(e, 4);
  EXPECT_FLOAT_EQ(e[0], 0.5f);
  EXPECT_FLOAT_EQ(e[1], -0.5f);
  EXPECT_FLOAT_EQ(e[2], 0.5f);
  EXPECT_FLOAT_EQ(e[3], -0.5f);
}

// Attention through a KvCache storing WHT-rotated keys and values: equals attention over
// the decoded rows (the hooks rotate q and un-rotate the output exactly once), and is
// close to an f32 cache; on outlier channels rotation beats the plain codec.
TEST(IntCodec, RotatedAttentionThroughCache) {
  const KvGeometry geo{1, 4, 2, 64};
  const int d = geo.head_dim, n = 300;
  ThreadPool pool(2);
  auto run = [&](const std::string& method, std::vector<float>* out, std::vector<float>* keys,
                 std::vector<float>* vals) {
    KvCacheConfig kc;
    kc.geometry = geo;
    kc.method = method;
    kc.page_bytes = 8192;
    auto cache = KvCache::create(kc);
    ASSERT_TRUE(cache.is_ok()) << cache.status().message();
    const SeqId s = (*cache)->add_sequence().value();
    // Keys and values with two outlier channels (x10): what rotation is for.
    auto k = random_vec(static_cast<size_t>(n) * geo.n_kv_heads * d, 1), v = random_vec(k.size(), 2);
    for (size_t r = 0; r < k.size() / d; ++r) {
      k[r * d + 5] *= 10.0f;
      k[r * d + 40] *= 10.0f;
      v[r * d + 7] *= 10.0f;
      v[r * d + 50] *= 10.0f;
    }
    const auto q = random_vec(static_cast<size_t>(n) * geo.n_heads * d, 3);
    std::vector<float> o(q.size());
    ASSERT_TRUE((*cache)->attend(s, 0, q.data(), k.data(), v.data(), nullptr, n, 0.125f, o.data(), pool).is_ok());
    (*cache)->commit(s, n);
    const auto q1 = random_vec(static_cast<size_t>(geo.n_heads) * d, 4);
    const auto k1 = random_vec(static_cast<size_t>(geo.n_kv_heads) * d, 5), v1 = random_vec(k1.size(), 6);
    out->assign(q1.size(), 0.0f);
    ASSERT_TRUE((*cache)->attend(s, 0, q1.data(), k1.data(), v1.data(), nullptr, 1, 0.125f, out->data(), pool).is_ok());
    // decoded rows of kv head 0 (+ the new token) for the reference
    ASSERT_TRUE((*cache)->read_back(s, 0, 0, keys, vals).is_ok());
    keys->resize(static_cast<size_t>(n) * d);
    vals->resize(static_cast<size_t>(n) * d);
    keys->insert(keys->end(), k1.begin(), k1.begin() + d);
    vals->insert(vals->end(), v1.begin(), v1.begin() + d);
    (*cache)->commit(s, 1);
  };
  std::vector<float> o32, k32, v32;
  run("f32", &o32, &k32, &v32);
  const auto q1 = random_vec(static_cast<size_t>(geo.n_heads) * d, 4);
  double err_plain = 0, err_rot = 0;
  for (const char* m : {"int4:g=0,wht=1", "int4:g=0"}) {
    std::vector<float> o, k, v;
    run(m, &o, &k, &v);
    // Against the stored rows: f32 sums, or 16-bit rounded inputs of the tiled VNNI ops
    // (as in method_conformance_test.cpp).
    double tol = 1e-4;
    // Named: the codecs belong to the method, which must outlive the loop.
    const auto method = create_method(m, geo);
    ASSERT_TRUE(method.is_ok()) << m;
    for (const Codec* c : (*method)->codecs())
      if (c->fused_rounding(d).query_bits || c->fused_rounding(d).prob_bits) tol = 5e-3;
    std::vector<double> ref(d), ref32(d);
    double err = 0;
    for (int h = 0; h < 2; ++h) {  // query heads of kv head 0
      kvtest::ref_attention_row(&q1[static_cast<size_t>(h) * d], k.data(), v.data(), n + 1, d, 0.125, ref.data());
      EXPECT_LT(kvtest::rel_err(&o[static_cast<size_t>(h) * d], ref.data(), d), tol) << m;
      kvtest::ref_attention_row(&q1[static_cast<size_t>(h) * d], k32.data(), v32.data(), n + 1, d, 0.125, ref32.data());
      err = std::max(err, kvtest::rel_err(&o[static_cast<size_t>(h) * d], ref32.data(), d));
    }
    (std::string(m).find("wht") != std::string::npos ? err_rot : err_plain) = err;
  }
  std::printf("attention vs f32 (max err / max |out|), int4 one group per head: rotated %.4f, plain %.4f\n", err_rot,
              err_plain);
  // Measured 0.18 vs 0.34 (values' outlier channels dominate the output's error).
  EXPECT_LT(err_rot, 0.25);
  EXPECT_LT(err_rot, 0.7 * err_plain);
}

TEST(IntMethods, DefaultsParamsAndRefusals) {
  const KvGeometry hd8{2, 4, 2, 8}, hd64{2, 4, 2, 64};
  auto m = create_method("int4", hd8);  // default group falls back to the whole head
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->spec(), "int4:g=8,clip=1,wht=0");
  m = create_method("int4:g=32", hd8);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("int4: group size 32 does not divide head_dim 8"), std::string::npos);
  m = create_method("int8:gs=32", hd64);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("valid parameters: g, clip, wht"), std::string::npos) << m.status().message();
  m = create_method("int4:g=12", hd64);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("g=12"), std::string::npos);
  m = create_method("int4:g=64", hd64);
  ASSERT_TRUE(m.is_ok());
  EXPECT_DOUBLE_EQ((*m)->bits_per_element(), 4.5);
  EXPECT_DOUBLE_EQ(create_method("int8", hd64).value()->bits_per_element(), 9.0);
  m = create_method("kivi:bits=3", hd64);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("valid: 2, 4"), std::string::npos);
  m = create_method("kivi2:window=bf16", hd64);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("valid: f16, f32"), std::string::npos);
  m = create_method("kivi2:dot=7", hd64);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("dot=7 is not supported; valid: 8, 16, auto"), std::string::npos) << m.status().message();
  // dot=auto: 8-bit integer dots for 2-bit codes, 16 for 4-bit; an explicit dot shows in the spec.
  EXPECT_EQ(create_method("kivi2:dot=16", hd64).value()->spec(), "kivi2:g=32,residual=128,window=f16,dot=16");
  EXPECT_EQ(create_method("int4:dot=auto", hd64).value()->spec(), "int4:g=32,clip=1,wht=0");
  EXPECT_EQ(make_codec("int2:layout=v").value()->fused_rounding(64).prob_bits == 7 || !kvtest::integer_kv_kernels_at(simd_tier()), true);
  EXPECT_EQ(make_codec("int4:layout=v").value()->fused_rounding(64).prob_bits == 14 || !kvtest::integer_kv_kernels_at(simd_tier()), true);
  m = create_method("kivi2", hd64);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ((*m)->spec(), "kivi2:g=32,residual=128,window=f16");
  EXPECT_DOUBLE_EQ((*m)->bits_per_element(), 3.0);
  EXPECT_TRUE(create_method("kivi2", hd8).is_ok());  // values fall back to whole-head groups
}

}  // namespace
}  // namespace vlkv
