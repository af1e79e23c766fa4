// Codec conformance: round trip within the declared bound (f16 exact against
// fp32_to_fp16), and fused scores/accumulate at every SIMD level against the
// scalar path and against decode() + a double-precision dot product.
#include "kv/codec.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/fp16.h"
#include "kv/codec_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;

TEST(Codec, RegistryListsF32AndF16AndRejectsUnknown) {
  std::vector<std::string> names;
  for (const CodecInfo* c : list_codecs()) names.push_back(c->name);
  EXPECT_NE(std::find(names.begin(), names.end(), "f32"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "f16"), names.end());
  auto bad = make_codec("int9");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("f16"), std::string::npos) << bad.status().message();
  auto bad_key = make_codec("f16:g=32");
  ASSERT_FALSE(bad_key.is_ok());
  EXPECT_NE(bad_key.status().message().find("no parameter 'g'"), std::string::npos);
}

TEST(Codec, F16RoundTripIsExactlyFp32ToFp16) {
  auto codec = make_codec("f16");
  ASSERT_TRUE(codec.is_ok());
  const int d = 40;
  std::vector<float> x = random_vec(d, 7, -70000.0f, 70000.0f);
  x[0] = 1e-6f;   // subnormal half
  x[1] = -0.0f;
  x[2] = 65519.0f;  // rounds to 65504
  x[3] = 1e-9f;   // underflows to 0
  std::vector<uint8_t> block((*codec)->block_bytes(d));
  std::vector<float> y(d);
  (*codec)->encode(x.data(), d, d, block.data());
  (*codec)->decode(block.data(), d, y.data());
  for (int i = 0; i < d; ++i) {
    const float want = fp16_to_fp32(fp32_to_fp16(x[i]));
    EXPECT_EQ(std::memcmp(&y[i], &want, 4), 0) << i << " " << x[i];
  }
  EXPECT_DOUBLE_EQ((*codec)->bits_per_element(d), 16.0);
}

// Each registered codec's storage laid out in small pages with a view starting mid-page.

class EveryCodec : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryCodec, RoundTripWithinDeclaredBound) {
  auto codec = make_codec(GetParam());
  ASSERT_TRUE(codec.is_ok());
  const Codec& c = **codec;
  for (int d : {16, 36, 64, 128}) {
    if (!c.check_head_dim(d).is_ok()) continue;
    const int tpb = c.tokens_per_block();
    const std::vector<float> x = random_vec(static_cast<size_t>(tpb) * d, d, -3.0f, 3.0f);
    std::vector<uint8_t> block(c.block_bytes(d));
    std::vector<float> y(x.size());
    c.encode(x.data(), d, d, block.data());
    c.decode(block.data(), d, y.data());
    double mx = 0;
    for (float e : x) mx = std::max(mx, static_cast<double>(std::abs(e)));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::abs(y[i] - x[i]), c.error_bound() * mx + 0x1p-24) << i;
  }
}

TEST_P(EveryCodec, FusedOpsMatchScalarAtEverySimdLevel) {
  auto codec = make_codec(GetParam());
  ASSERT_TRUE(codec.is_ok());
  const Codec& c = **codec;
  kvtest::SimdLevelGuard guard;
  for (int d : {16, 36, 64, 72, 128}) {
    for (int n_q : {1, 4, 7}) {
      if (!c.check_head_dim(d).is_ok()) continue;
      const int tpb = c.tokens_per_block();
      const int n = tpb * (37 / tpb + 1);  // crosses pages, odd counts for the 4-token unroll
      const std::vector<float> x = random_vec(static_cast<size_t>(n) * d, n + d, -2.0f, 2.0f);
      const std::vector<float> q = random_vec(static_cast<size_t>(n_q) * d, 3 + d, -2.0f, 2.0f);
      const std::vector<float> p = random_vec(static_cast<size_t>(n_q) * n, 5 + d, 0.0f, 1.0f);
      kvtest::PagedCodes paged = kvtest::encode_paged(c, x, n, d, /*blocks_per_page=*/5, /*skip_blocks=*/3, /*slack_bytes=*/64);
      // Reference from decode() in double.
      std::vector<float> dec(static_cast<size_t>(n) * d);
      for (int b = 0; b < n / tpb; ++b) c.decode(paged.view.block(b), d, &dec[static_cast<size_t>(b) * tpb * d]);
      const float scale = 0.125f;
      std::vector<double> ref_s(static_cast<size_t>(n_q) * n), ref_o(static_cast<size_t>(n_q) * d, 0.5);
      std::vector<double> mag_s(ref_s.size()), mag_o(ref_o.size(), 0.5);
      for (int r = 0; r < n_q; ++r)
        for (int t = 0; t < n; ++t) {
          double s = 0, m = 0;
          for (int i = 0; i < d; ++i) {
            s += static_cast<double>(q[r * d + i]) * dec[static_cast<size_t>(t) * d + i];
            m += std::abs(static_cast<double>(q[r * d + i]) * dec[static_cast<size_t>(t) * d + i]);
          }
          ref_s[r * n + t] = s * scale;
          mag_s[r * n + t] = m * scale;
          for (int i = 0; i < d; ++i) {
            ref_o[r * d + i] += p[r * n + t] * static_cast<double>(dec[static_cast<size_t>(t) * d + i]);
            mag_o[r * d + i] += std::abs(p[r * n + t] * dec[static_cast<size_t>(t) * d + i]);
          }
        }
      for (SimdTier tier : kvtest::simd_tiers()) {
        set_simd_tier_for_testing(tier);
        const char* level = simd_tier_name(tier);
        std::vector<float> logits(static_cast<size_t>(n_q) * (n + 3), -1.0f);  // ld = n + 3
        std::vector<float> qt = q;  // rotated codecs: scores() takes the transformed query
        if (c.query_transform()) c.transform_query(qt.data(), n_q, d);
        c.scores(qt.data(), n_q, paged.view, scale, logits.data(), n + 3);
        std::vector<float> out(static_cast<size_t>(n_q) * d, 0.5f);
        if (c.output_transform()) {  // accumulate in the rotated basis, then un-rotate the sum
          std::vector<float> rot(out.size(), 0.0f);
          c.accumulate(p.data(), n, n_q, paged.view, rot.data());
          c.untransform_output(rot.data(), n_q, d);
          for (size_t i = 0; i < out.size(); ++i) out[i] += rot[i];
        } else {
          c.accumulate(p.data(), n, n_q, paged.view, out.data());
        }
        // f32 accumulation over <= 128 terms: error <= ~d * 2^-24 * sum|terms|; 1e-5 leaves margin.
        // Codecs whose fused ops round their inputs (Codec::fused_rounding) add
        // the bound of int_tile_kernels_avx512.h: d * max|q| * 2.02 max|x| / 32766 per score
        // (32766 = 2 * 16383 query levels), n * max p * 2.02 max|x| / 32766 per output (14-bit p'), with
        // max|x| over the rows in the stored basis (rotated codecs: times sqrt(d) back out).
        const Codec::FusedRounding rounding = c.fused_rounding(d);
        double max_x = 0, max_q = 0;
        std::vector<float> stored = dec;
        if (c.query_transform()) c.transform_query(stored.data(), n, d);  // same map for rows
        for (float e : stored) max_x = std::max(max_x, static_cast<double>(std::abs(e)));
        for (float e : qt) max_q = std::max(max_q, static_cast<double>(std::abs(e)));
        const double rot = c.output_transform() ? std::sqrt(static_cast<double>(d)) : 1.0;
        // dot=8 (the default of 2-bit codes): 8-bit queries and 7-bit p', 254 levels instead of 32766.
        const double q_levels = rounding.query_bits == 8 ? 254 : 32766, p_levels = rounding.prob_bits == 7 ? 254 : 32766;
        const double tol_s = rounding.query_bits ? d * max_q * 2.02 * max_x / q_levels * scale : 0.0;
        const double tol_o = rounding.prob_bits ? n * 2.02 * max_x / p_levels * rot : 0.0;
        for (int r = 0; r < n_q; ++r) {
          for (int t = 0; t < n; ++t)
            ASSERT_NEAR(logits[r * (n + 3) + t], ref_s[r * n + t], 1e-5 * mag_s[r * n + t] + tol_s + 1e-30)
                << level << " d=" << d << " n_q=" << n_q << " r=" << r << " t=" << t;
          for (int t = n; t < n + 3; ++t) ASSERT_EQ(logits[r * (n + 3) + t], -1.0f);  // ld padding untouched
          for (int i = 0; i < d; ++i)
            ASSERT_NEAR(out[r * d + i], ref_o[r * d + i], 1e-5 * mag_o[r * d + i] + tol_o)
                << level << " d=" << d << " n_q=" << n_q << " r=" << r << " i=" << i;
        }
      }
    }
  }
}

std::vector<std::string> codec_names() {
  std::vector<std::string> out;
  for (const CodecInfo* c : list_codecs()) out.push_back(c->name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registered, EveryCodec, ::testing::ValuesIn(codec_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace vlkv
