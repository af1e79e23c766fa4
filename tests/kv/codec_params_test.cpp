// Codecs built from IntCodecParams (int_codec.h) and method specs checked with typed errors
// (method_registry.h): a struct builds the same codec, byte for byte, as the spec string a
// user types; validate_int_codec names the kind of every refusal; the rotation is a wrapper
// whose stored bytes are the inner codec's bytes of the rotated rows; check_method_spec
// sorts syntax, names, keys and compositions without a model (what the CLI checks first).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kv/codec_registry.h"
#include "kv/codecs/int_codec.h"
#include "kv/codecs/wht.h"
#include "kv/codecs/wht_codec.h"
#include "kv/method_registry.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

std::vector<uint8_t> encode_all(const Codec& c, const std::vector<float>& x, int d, int n_blocks) {
  const int tpb = c.tokens_per_block();
  const int64_t bb = c.block_bytes(d);
  std::vector<uint8_t> out(static_cast<size_t>(n_blocks * bb));
  for (int b = 0; b < n_blocks; ++b) c.encode(x.data() + static_cast<size_t>(b) * tpb * d, d, d, out.data() + b * bb);
  return out;
}

// Every grouping, layout, width, clip, dot and rotation: the struct and the text give the
// same name and the same stored bytes (tolerance 0: the same quantizer must run).
TEST(IntCodecParams, StructBuildsTheCodecItsSpecNames) {
  const int d = 64;
  int checked = 0;
  for (int bits : {2, 3, 4, 8})
    for (bool wht : {false, true})
      for (int G : {0, 16, 24})
        for (IntLayout layout : {IntLayout::kRows, IntLayout::kKeyTiles, IntLayout::kValueTiles})
          for (int dot : {0, 8}) {
            if (G && layout != IntLayout::kRows) continue;
            if (layout != IntLayout::kRows && bits == 3) continue;
            const IntCodecParams p{.bits = bits, .g = 16, .G = G, .clip = 0.9, .wht = wht, .layout = layout, .dot_bits = dot};
            Result<std::shared_ptr<const Codec>> from_struct = make_int_codec(p);
            ASSERT_TRUE(from_struct.is_ok()) << from_struct.status().message();
            Result<std::shared_ptr<const Codec>> from_text = make_codec((*from_struct)->name());
            ASSERT_TRUE(from_text.is_ok()) << (*from_struct)->name() << ": " << from_text.status().message();
            EXPECT_EQ((*from_text)->name(), (*from_struct)->name());
            EXPECT_EQ(int_codec_family(p), (*from_struct)->name().substr(0, (*from_struct)->name().find(':')));
            const int tpb = (*from_struct)->tokens_per_block();
            const std::vector<float> x = kvtest::random_vec(static_cast<size_t>(3 * tpb) * d, 11 + bits, -2.0f, 2.0f);
            EXPECT_EQ(encode_all(**from_struct, x, d, 3), encode_all(**from_text, x, d, 3)) << (*from_struct)->name();
            ++checked;
          }
  EXPECT_GT(checked, 50);
}

TEST(IntCodecParams, ValidationNamesTheKindOfEachRefusal) {
  struct Case {
    IntCodecParams p;
    int head_dim;
    SpecErrorKind kind;
    const char* says;
  };
  const Case cases[] = {
      {{.bits = 5}, 0, SpecErrorKind::kBadValue, "bits=5"},
      {{.bits = 4, .g = 12}, 0, SpecErrorKind::kBadValue, "multiple of 8"},
      {{.bits = 4, .G = 2000}, 0, SpecErrorKind::kBadValue, "G=2000"},
      {{.bits = 3, .layout = IntLayout::kKeyTiles}, 0, SpecErrorKind::kBadValue, "needs 2, 4 or 8 bits"},
      {{.bits = 4, .G = 32, .layout = IntLayout::kValueTiles}, 0, SpecErrorKind::kBadValue, "per-token"},
      {{.bits = 4, .clip = 0.01}, 0, SpecErrorKind::kBadValue, "clip=0.01"},
      {{.bits = 4, .dot_bits = 12}, 0, SpecErrorKind::kBadValue, "dot=12"},
      {{.bits = 4, .g = 32}, 8, SpecErrorKind::kHeadDim, "does not divide head_dim 8"},
      {{.bits = 4, .g = 8, .layout = IntLayout::kKeyTiles}, 40, SpecErrorKind::kHeadDim, "multiple of 16"},
      {{.bits = 4, .g = 8, .wht = true}, 48, SpecErrorKind::kHeadDim, "power of two"},
      {{.bits = 4, .g = 8}, 12, SpecErrorKind::kHeadDim, "multiple of 8"},
  };
  for (const Case& c : cases) {
    std::optional<SpecError> e = validate_int_codec(c.p, c.head_dim);
    ASSERT_TRUE(e.has_value()) << c.says;
    EXPECT_EQ(e->kind, c.kind) << e->message;
    EXPECT_NE(e->message.find(c.says), std::string::npos) << e->message;
  }
  EXPECT_FALSE(validate_int_codec({.bits = 4, .g = 32}, 128).has_value());
  EXPECT_FALSE(validate_int_codec({.bits = 2, .G = 32, .wht = true}, 128).has_value());
  // Refusals at creation carry the same message.
  Result<std::shared_ptr<const Codec>> bad = make_int_codec({.bits = 5});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), validate_int_codec({.bits = 5})->message);
}

// The canonical clip text parses back to the value the codec was built with, so a
// method's spec rebuilds the same codec.
TEST(IntCodecParams, CanonicalClipRoundTripsThroughItsText) {
  for (double c : {1.0, 0.9, 0.123456789, 0.05, 0.87654321}) {
    const double k = canonical_clip(c);
    EXPECT_EQ(canonical_clip(k), k) << c;
    EXPECT_EQ(std::stod(clip_text(k)), k) << c;
  }
}

// wht_X stores X's bytes of the rotated rows, decodes back in the original basis, and
// keeps the fused ops in the rotated basis under one shared transform id.
TEST(WhtCodec, WrapsAnyCodecAsARotation) {
  const int d = 64;
  for (const char* inner_spec : {"int4:g=32", "int2c:G=16", "f16"}) {
    std::shared_ptr<const Codec> inner = make_codec(inner_spec).value();
    std::shared_ptr<const Codec> rot = make_wht_codec(inner);
    EXPECT_EQ(rot->name(), "wht_" + inner->name());
    EXPECT_EQ(rot->block_bytes(d), inner->block_bytes(d));
    EXPECT_NE(rot->query_transform(), 0);
    EXPECT_EQ(rot->query_transform(), rot->output_transform());
    EXPECT_FALSE(rot->check_head_dim(48).is_ok());  // not a power of two
    const int tpb = inner->tokens_per_block();
    const std::vector<float> x = kvtest::random_vec(static_cast<size_t>(tpb) * d, 5, -1.0f, 1.0f);
    std::vector<float> y = x;
    wht_rows(y.data(), tpb, d);
    EXPECT_EQ(encode_all(*rot, x, d, 1), encode_all(*inner, y, d, 1)) << inner_spec;
    // decode = inner decode rotated back (tolerance 0: the same two steps).
    const std::vector<uint8_t> block = encode_all(*rot, x, d, 1);
    std::vector<float> got(x.size()), want(x.size());
    rot->decode(block.data(), d, got.data());
    inner->decode(block.data(), d, want.data());
    wht_rows(want.data(), tpb, d);
    EXPECT_EQ(got, want) << inner_spec;
  }
  // The registered wht_ codecs are this wrapper.
  EXPECT_EQ(make_codec("wht_int4:g=32").value()->query_transform(), make_wht_codec(make_codec("f16").value())->query_transform());
}

TEST(MethodSpecCheck, SortsWhatNeedsNoModelByKind) {
  struct Case {
    const char* spec;
    SpecErrorKind kind;
  };
  for (const Case& c : {Case{"f16:", SpecErrorKind::kSyntax}, Case{"int5", SpecErrorKind::kUnknownName},
                        Case{"f16:bits=2", SpecErrorKind::kUnknownKey}, Case{"f16+kivi2", SpecErrorKind::kComposition},
                        Case{"qcache_vla:n_lazy=2+nosuch", SpecErrorKind::kUnknownName},
                        Case{"qcache_vla:n_lazy=2+kivi2:typo=1", SpecErrorKind::kUnknownKey}}) {
    std::optional<SpecError> e = check_method_spec(c.spec);
    ASSERT_TRUE(e.has_value()) << c.spec;
    EXPECT_EQ(e->kind, c.kind) << c.spec << ": " << e->message;
  }
  // Values are checked with the model's geometry, not here.
  EXPECT_FALSE(check_method_spec("kivi:bits=3").has_value());
  EXPECT_FALSE(check_method_spec("qcache_vla:n_lazy=2+vidkv:window=0").has_value());
}

// The checks that need no model agree with create_method: what check_method_spec passes
// fails in create_method only for a value or the head_dim, never for a name or a key.
TEST(MethodSpecCheck, AgreesWithCreateMethod) {
  const KvGeometry geo{2, 4, 2, 8};
  for (const char* spec : {"f16:", "int5", "f16:bits=2", "f16+kivi2"}) {
    std::optional<SpecError> e = check_method_spec(spec);
    ASSERT_TRUE(e.has_value()) << spec;
    Result<std::unique_ptr<Method>> m = create_method(spec, geo);
    ASSERT_FALSE(m.is_ok()) << spec;
    EXPECT_EQ(m.status().message(), e->message) << spec;
  }
  EXPECT_TRUE(create_method("int4:g=8", geo).is_ok());
  EXPECT_FALSE(check_method_spec("int4:g=32").has_value());
  EXPECT_FALSE(create_method("int4:g=32", geo).is_ok());  // head_dim 8
}

}  // namespace
}  // namespace vlkv
