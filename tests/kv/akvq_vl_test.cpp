// The akvq_vl method (its saliency logic: akvq_vl_saliency_test.cpp): parameters, codecs
// (16-token tiles on the VNNI path where they pay, rows elsewhere) and stored bits, and
// store() driven with hand-made StoreInput through a LayerEditor: TSA text/visual split,
// patterns and per-head pivots from statistics, the pivot budget, window folding, f16
// staging of tiled classes, kinds read in storage order, pivots staying f16 over many
// decode steps, exact bytes without statistics; then through KvCache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "akvq_test_util.h"
#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kv/kv_cache.h"
#include "kv/layer_editor.h"
#include "kv/method_registry.h"
#include "kv/methods/akvq_vl/saliency.h"
#include "kv/page_table.h"
#include "kv_test_util.h"

namespace vlkv {
namespace {

using kvtest::random_vec;
using namespace akvqtest;

// ---------------- the method: parameters and bits ----------------

// akvq_vl reads only multi-token steps' statistics, so its plan lets decode steps skip the
// probe pass; zipvl re-scores decode tokens from their mass and keeps it.
TEST(AkvqMethod, StatisticsOnlyForPrefillSteps) {
  const KvGeometry geo{4, 4, 2, 64};
  auto akvq = create_method("akvq_vl", geo);
  ASSERT_TRUE(akvq.is_ok()) << akvq.status().message();
  for (int l = 0; l < geo.n_layers; ++l) {
    const LayerPlan plan = (*akvq)->layer_plan(l);
    EXPECT_EQ(plan.stats, static_cast<uint32_t>(kStatKeyMass)) << l;
    EXPECT_FALSE(plan.stats_in_decode) << l;
  }
  auto zipvl = create_method("zipvl", geo);
  ASSERT_TRUE(zipvl.is_ok()) << zipvl.status().message();
  EXPECT_TRUE((*zipvl)->layer_plan(0).stats_in_decode);
}

TEST(AkvqMethod, SpecDefaultsBitsAndBadParameters) {
  const KvGeometry g128{32, 32, 8, 128};
  auto m = create_method("akvq_vl", g128);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->spec(),
            "akvq_vl:bits=2,text_bits=4,g=128,clip=0.8,text_clip=1,n_pivots=16,window=128,pattern=auto,"
            "tsa_layers=2,wht=1,dot=auto");
  // wht_int2 g128: 32 bytes of codes + f16 scale and min = 36 bytes per 128 elements.
  EXPECT_DOUBLE_EQ((*m)->bits_per_element(), 2.25);
  EXPECT_DOUBLE_EQ((*m)->bytes_per_token(), 2.0 * 32 * 8 * 36);
  EXPECT_LE((*m)->bits_per_element(), 3.0);
  // 2- and 4-bit codes in 16-token tiles, keys in key tiles and values in value tiles
  // (the integer decode path; dot=8 by default at 2 bits, 16 at 4); the staging and the window in f16.
  auto names = [](const Method& method) {
    std::vector<std::string> out;
    for (const Codec* c : method.codecs()) out.push_back(c->name());
    return out;
  };
  EXPECT_EQ(names(**m), (std::vector<std::string>{"wht_int2:g=128,clip=0.8,layout=k", "wht_int2:g=128,clip=0.8,layout=v",
                                                  "wht_int4:g=128,clip=1,layout=k", "wht_int4:g=128,clip=1,layout=v",
                                                  "f16"}));
  auto dot16 = create_method("akvq_vl:dot=16,text_bits=8", g128);
  ASSERT_TRUE(dot16.is_ok()) << dot16.status().message();
  EXPECT_NE((*dot16)->spec().find(",dot=16"), std::string::npos) << (*dot16)->spec();
  // 8-bit text codes tile too (integer dots on 8-bit tiles); dot=16 is their default, so no suffix.
  EXPECT_EQ(names(**dot16), (std::vector<std::string>{"wht_int2:g=128,clip=0.8,layout=k,dot=16",
                                                      "wht_int2:g=128,clip=0.8,layout=v,dot=16",
                                                      "wht_int8:g=128,clip=1,layout=k", "wht_int8:g=128,clip=1,layout=v",
                                                      "f16"}));
  EXPECT_DOUBLE_EQ((*dot16)->bits_per_element(), 2.25);
  auto dot8 = create_method("akvq_vl:dot=8", g128);  // every class at 8 bits, the 4-bit text codes too
  ASSERT_TRUE(dot8.is_ok()) << dot8.status().message();
  EXPECT_EQ(names(**dot8), (std::vector<std::string>{"wht_int2:g=128,clip=0.8,layout=k", "wht_int2:g=128,clip=0.8,layout=v",
                                                     "wht_int4:g=128,clip=1,layout=k,dot=8",
                                                     "wht_int4:g=128,clip=1,layout=v,dot=8", "f16"}));
  // Smaller heads: g = head_dim; bits 4 clips at 1.
  auto s = create_method("akvq_vl:bits=4", KvGeometry{2, 4, 2, 64});
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_NE((*s)->spec().find("bits=4,text_bits=4,g=64,clip=1,"), std::string::npos) << (*s)->spec();
  auto tiny = create_method("akvq_vl:g=0,wht=0,pattern=map", KvGeometry{5, 8, 4, 8});
  ASSERT_TRUE(tiny.is_ok()) << tiny.status().message();
  EXPECT_DOUBLE_EQ((*tiny)->bits_per_element(), 2.0 + 32.0 / 8);
  const KvGeometry g64{2, 4, 2, 64};
  for (const char* bad : {"akvq_vl:g=48", "akvq_vl:g=128", "akvq_vl:g=12", "akvq_vl:bits=5", "akvq_vl:bits=1",
                          "akvq_vl:text_bits=5", "akvq_vl:clip=0", "akvq_vl:clip=1.5", "akvq_vl:window=-1",
                          "akvq_vl:n_pivots=-2", "akvq_vl:pattern=sometimes", "akvq_vl:wht=2", "akvq_vl:tsa=1",
                          "akvq_vl:dot=12"}) {
    auto b = create_method(bad, g64);
    ASSERT_FALSE(b.is_ok()) << bad;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto g = create_method("akvq_vl:g=48", g64);
  EXPECT_NE(g.status().message().find("g=48 does not divide head_dim 64"), std::string::npos) << g.status().message();
  auto p = create_method("akvq_vl:pattern=sometimes", g64);
  EXPECT_NE(p.status().message().find("pattern=sometimes"), std::string::npos);
  // The rotation needs a power-of-two head; plain RTN does not.
  auto d96 = create_method("akvq_vl", KvGeometry{2, 4, 2, 96});
  ASSERT_FALSE(d96.is_ok());
  EXPECT_NE(d96.status().message().find("Walsh-Hadamard"), std::string::npos) << d96.status().message();
  EXPECT_TRUE(create_method("akvq_vl:wht=0", KvGeometry{2, 4, 2, 96}).is_ok());
}

// The tiled codes' fused ops are the int codecs' VNNI kernels where the CPU has them
// (they report their input rounding then, Codec::fused_rounding), the dequantizing path
// elsewhere.
// The integer tile kernels (int_kernels.h) exist at every x86 SIMD tier but scalar.
TEST(AkvqMethod, TiledCodesTakeTheIntegerPathAtEverySimdTier) {
  const bool vnni = kvtest::integer_kv_kernels_at(simd_tier());
  for (int d : {64, 128}) {
    auto m = create_method("akvq_vl", KvGeometry{2, 4, 2, d});
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    int tiled = 0;
    for (const Codec* c : (*m)->codecs()) {
      const Codec::FusedRounding r = c->fused_rounding(d);
      const bool two_bit = c->name().find("int2") != std::string::npos;  // dot=8 by default, 4-bit dot=16
      if (c->name().find("layout=k") != std::string::npos) {
        ++tiled;
        EXPECT_EQ(r.query_bits, vnni ? (two_bit ? 8 : 15) : 0) << c->name();
      } else if (c->name().find("layout=v") != std::string::npos) {
        ++tiled;
        EXPECT_EQ(r.prob_bits, vnni ? (two_bit ? 7 : 14) : 0) << c->name();
      }
    }
    EXPECT_EQ(tiled, 4) << "d=" << d;  // 2-bit and 4-bit classes, K and V
  }
}

// ---------------- the method through a LayerEditor ----------------

constexpr int kD = 64;

// One (sequence, layer) of the cache driven with hand-made StoreInput.
struct LayerHarness {
  std::unique_ptr<Method> method;
  PagePool pool{256ull << 20, 4096};
  LayerCache layer;
  PendingStep pending;
  int layer_index = 0, n_kv = 2;
  int64_t n = 0;
  std::vector<float> k, v;  // [n, n_kv, d] exact history

  LayerHarness(const std::string& spec, int layer_index_, int n_kv_ = 2, int n_layers = 4)
      : layer_index(layer_index_), n_kv(n_kv_) {
    auto m = create_method(spec, KvGeometry{n_layers, 2 * n_kv, n_kv, kD});
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    method = std::move(*m);
    layer.heads.resize(n_kv);
    layer.state = method->new_layer_state(layer_index);
    pending.n_new = 0;
  }

  // n_new = kinds.size() tokens with random rows; mass: [n_kv, n + n_new] or null.
  void store(const std::vector<TokenKind>& kinds, const std::vector<float>* mass, uint32_t seed) {
    const int n_new = static_cast<int>(kinds.size());
    const auto kk = random_vec(static_cast<size_t>(n_new) * n_kv * kD, seed, -2.0f, 2.0f);
    const auto vv = random_vec(kk.size(), seed + 1, -1.0f, 1.0f);
    AttentionStats stats;
    if (mass) {
      ASSERT_EQ(mass->size(), static_cast<size_t>((n + n_new) * n_kv));
      stats.key_mass = mass->data();
    }
    StoreInput in;
    in.layer = layer_index;
    in.n_cached = n;
    in.n_new = n_new;
    in.k = kk.data();
    in.v = vv.data();
    in.kinds = kinds.data();
    in.stats = mass ? &stats : nullptr;
    LayerEditor ed(pool, layer, pending, layer_index, kD);
    const Status st = method->store(in, ed);
    ASSERT_TRUE(st.is_ok()) << st.message();
    layer.n_tokens += n_new;
    n += n_new;
    k.insert(k.end(), kk.begin(), kk.end());
    v.insert(v.end(), vv.begin(), vv.end());
  }

  const Segment* segment(int h, uint32_t tag) const {
    for (const Segment& s : layer.heads[h].segments)
      if (s.tag == tag) return &s;
    return nullptr;
  }
  int64_t segment_rows(int h, uint32_t tag) const {
    const Segment* s = segment(h, tag);
    return s ? s->n_tokens : 0;
  }
  // The segment tags that hold class `cls`'s rows, in class order (code segment, then the
  // f16 staging of a tiled class); the window and the pivots are one segment each.
  static std::vector<uint32_t> class_tags(uint32_t cls) {
    if (cls == akvq::kTagLow || cls == akvq::kTagText) return {cls, akvq::stage_tag_of(cls)};
    return {cls};
  }
  // Rows of class `cls` (kTagLow, kTagText, kTagPivot) or of the window (kTagWindow).
  int64_t count(int h, uint32_t cls) const {
    int64_t n_rows = 0;
    for (uint32_t tag : class_tags(cls)) n_rows += segment_rows(h, tag);
    return n_rows;
  }
  // Stored rows of a segment: [segment_rows, d].
  std::vector<float> segment_stored(int h, uint32_t tag, bool key) const {
    const Segment* s = segment(h, tag);
    std::vector<float> x(static_cast<size_t>(s ? s->n_tokens : 0) * kD);
    if (s) read_stream(key ? s->k : s->v, 0, s->n_tokens, kD, x.data());
    return x;
  }
  // Stored rows of class `cls` (or the window) in class order: [count, d].
  std::vector<float> stored(int h, uint32_t cls, bool key) const {
    std::vector<float> x;
    for (uint32_t tag : class_tags(cls)) {
      const auto part = segment_stored(h, tag, key);
      x.insert(x.end(), part.begin(), part.end());
    }
    return x;
  }
  // Exact input rows of head h at the given positions: [positions, d].
  std::vector<float> input(int h, const std::vector<int64_t>& positions, bool key) const {
    std::vector<float> x;
    for (int64_t t : positions) {
      const float* r = (key ? k : v).data() + (t * n_kv + h) * kD;
      x.insert(x.end(), r, r + kD);
    }
    return x;
  }
  // Method::stored_positions of head h, checked to be a permutation of [0, n); per segment tag.
  std::vector<std::vector<int64_t>> segment_positions(int h) const {
    std::vector<int64_t> all;
    EXPECT_TRUE(method->stored_positions(layer.state.get(), h, layer.heads[h].segments, &all));
    EXPECT_EQ(static_cast<int64_t>(all.size()), n);
    std::vector<int64_t> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t t = 0; t < static_cast<int64_t>(sorted.size()); ++t) EXPECT_EQ(sorted[t], t);
    std::vector<std::vector<int64_t>> by_tag(akvq::kNumTags);
    size_t r = 0;
    for (const Segment& s : layer.heads[h].segments)
      for (int64_t i = 0; i < s.n_tokens && r < all.size(); ++i) by_tag[s.tag].push_back(all[r++]);
    return by_tag;
  }
  // Positions of head h's stored rows in storage order (the statistics' key order).
  std::vector<int64_t> storage_order(int h) const {
    std::vector<int64_t> all;
    EXPECT_TRUE(method->stored_positions(layer.state.get(), h, layer.heads[h].segments, &all));
    return all;
  }
  // The same per class (and the window), in class order: [kTagLow .. kTagWindow].
  std::vector<std::vector<int64_t>> positions(int h) const {
    const auto by_tag = segment_positions(h);
    std::vector<std::vector<int64_t>> by_class(4);
    for (uint32_t cls = 0; cls < 4; ++cls)
      for (uint32_t tag : class_tags(cls)) by_class[cls].insert(by_class[cls].end(), by_tag[tag].begin(), by_tag[tag].end());
    return by_class;
  }
  // Bytes of the blocks held (page tails excluded).
  double bytes() const {
    double b = 0;
    for (const HeadCache& hc : layer.heads)
      for (const Segment& s : hc.segments)
        b += static_cast<double>(s.n_tokens) * (static_cast<double>(s.k.block_bytes) / s.k.codec->tokens_per_block() +
                                                static_cast<double>(s.v.block_bytes) / s.v.codec->tokens_per_block());
    return b;
  }
};

double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (a[i] - b[i]) * (a[i] - b[i]);
    s += b[i] * b[i];
  }
  return std::sqrt(e / s);
}

std::vector<float> f16_round(std::vector<float> x) {
  for (float& e : x) e = fp16_to_fp32(fp32_to_fp16(e));
  return x;
}

std::vector<int64_t> positions_where(const std::vector<TokenKind>& kinds, bool text) {
  std::vector<int64_t> out;
  for (size_t t = 0; t < kinds.size(); ++t)
    if (akvq::is_text(kinds[t]) == text) out.push_back(static_cast<int64_t>(t));
  return out;
}

// Relative RMS of stored vs exact rows (uniform data): int4 measured ~0.06, int2 with
// clip 0.8 ~0.35; rows of another token would be ~1.4 (independent random rows). Bars
// halfway leave margin both ways.
constexpr double kInt4Rms = 0.15, kInt2Rms = 0.6;

TEST(AkvqStore, TsaStoresTextAtFourBitsAndVisualAtTwo) {
  LayerHarness hx("akvq_vl:pattern=tsa,window=0", 0);
  const auto kinds = kinds_of({{kS, 1}, {kT, 9}, {kV, 100}, {kT, 20}});
  hx.store(kinds, nullptr, 1);
  const auto text = positions_where(kinds, true), visual = positions_where(kinds, false);
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(hx.count(h, akvq::kTagText), 30);
    EXPECT_EQ(hx.count(h, akvq::kTagLow), 100);
    EXPECT_EQ(hx.count(h, akvq::kTagPivot), 0);
    EXPECT_EQ(hx.count(h, akvq::kTagWindow), 0);
    const auto pos = hx.positions(h);
    EXPECT_EQ(pos[akvq::kTagText], text);
    EXPECT_EQ(pos[akvq::kTagLow], visual);
    for (bool key : {true, false}) {
      const double et = rel_rms(hx.stored(h, akvq::kTagText, key), hx.input(h, text, key));
      const double ev = rel_rms(hx.stored(h, akvq::kTagLow, key), hx.input(h, visual, key));
      EXPECT_LT(et, kInt4Rms) << "head " << h << (key ? " K" : " V");
      EXPECT_GT(et, 0.0);
      EXPECT_LT(ev, kInt2Rms) << "head " << h << (key ? " K" : " V");
      EXPECT_GT(ev, 2 * et);  // 2-bit codes are coarser
    }
  }
}

// A tiled class keeps whole 16-token tiles in its code segment and its newest
// (rows % 16) rows in an f16 staging segment, in class order; one-token steps fill
// the staging and move a tile out when it is full.
TEST(AkvqStore, TiledClassesKeepWholeTilesAndStageTheRestInF16) {
  LayerHarness hx("akvq_vl:pattern=tsa,window=0", 0);
  const auto kinds = kinds_of({{kS, 1}, {kT, 9}, {kV, 100}, {kT, 20}});
  hx.store(kinds, nullptr, 1);
  auto text = positions_where(kinds, true);
  const auto visual = positions_where(kinds, false);
  for (int h = 0; h < 2; ++h) {
    // 100 visual rows: 96 in 2-bit tiles, 4 staged; 30 text rows: 16 in 4-bit tiles, 14 staged.
    EXPECT_EQ(hx.segment_rows(h, akvq::kTagLow), 96);
    EXPECT_EQ(hx.segment_rows(h, akvq::kTagLowStage), 4);
    EXPECT_EQ(hx.segment_rows(h, akvq::kTagText), 16);
    EXPECT_EQ(hx.segment_rows(h, akvq::kTagTextStage), 14);
    const Segment* low = hx.segment(h, akvq::kTagLow);
    ASSERT_NE(low, nullptr);
    EXPECT_EQ(low->k.codec->tokens_per_block(), 16);
    EXPECT_NE(low->k.codec->name().find("layout=k"), std::string::npos) << low->k.codec->name();
    EXPECT_NE(low->v.codec->name().find("layout=v"), std::string::npos) << low->v.codec->name();
    const auto pos = hx.segment_positions(h);
    EXPECT_EQ(pos[akvq::kTagLowStage], std::vector<int64_t>(visual.end() - 4, visual.end()));
    EXPECT_EQ(pos[akvq::kTagTextStage], std::vector<int64_t>(text.end() - 14, text.end()));
    for (bool key : {true, false}) {
      EXPECT_EQ(hx.segment_stored(h, akvq::kTagLowStage, key), f16_round(hx.input(h, pos[akvq::kTagLowStage], key)));
      EXPECT_EQ(hx.segment_stored(h, akvq::kTagTextStage, key), f16_round(hx.input(h, pos[akvq::kTagTextStage], key)));
    }
  }
  for (int s = 0; s < 40; ++s) {  // decode: TSA text rows
    hx.store({kT}, nullptr, 50 + s);
    text.push_back(hx.n - 1);
    ASSERT_EQ(hx.segment_rows(0, akvq::kTagText) % 16, 0);
    ASSERT_LT(hx.segment_rows(0, akvq::kTagTextStage), 16);
    ASSERT_EQ(hx.count(0, akvq::kTagText), 31 + s);
  }
  EXPECT_EQ(hx.segment_rows(1, akvq::kTagText), 64);
  EXPECT_EQ(hx.segment_rows(1, akvq::kTagTextStage), 6);
  EXPECT_EQ(hx.positions(1)[akvq::kTagText], text);
  EXPECT_EQ(hx.positions(1)[akvq::kTagLow], visual);
  EXPECT_LT(rel_rms(hx.stored(1, akvq::kTagText, true), hx.input(1, text, true)), kInt4Rms);
}

// 3-bit codes and groups of 8 channels do not tile: rows, one token per block, no staging.
TEST(AkvqStore, RowsLayoutWhereTilesDoNotPay) {
  for (const char* spec : {"akvq_vl:pattern=tsa,window=0,bits=3,text_bits=3", "akvq_vl:pattern=tsa,window=0,g=8,wht=0"}) {
    LayerHarness hx(spec, 0);
    hx.store(kinds_of({{kT, 7}, {kV, 37}}), nullptr, 2);
    EXPECT_EQ(hx.segment_rows(0, akvq::kTagLow), 37) << spec;
    EXPECT_EQ(hx.segment_rows(0, akvq::kTagText), 7) << spec;
    EXPECT_EQ(hx.segment(0, akvq::kTagLowStage), nullptr) << spec;
    EXPECT_EQ(hx.segment(0, akvq::kTagTextStage), nullptr) << spec;
    EXPECT_EQ(hx.segment(0, akvq::kTagLow)->k.codec->tokens_per_block(), 1) << spec;
  }
}

// Mass [n_kv, n]: `base` everywhere, heavy[h] keys of head h at 50.
std::vector<float> mass_with(int n_kv, int64_t n, float base, const std::vector<std::vector<int64_t>>& heavy) {
  std::vector<float> m(static_cast<size_t>(n_kv * n), base);
  for (int h = 0; h < n_kv; ++h)
    for (int64_t t : heavy[h]) m[h * n + t] = 50.0f;
  return m;
}

TEST(AkvqStore, AutoDetectsPsaAndKeepsEachHeadsPivotsInF16) {
  LayerHarness hx("akvq_vl:n_pivots=3,window=0", 0);
  const auto kinds = kinds_of({{kT, 10}, {kV, 90}});
  // Head 0's sinks: tokens 0, 40, 41; head 1's: 0, 7, 99 (a visual token may be a pivot).
  const auto mass = mass_with(2, 100, 0.1f, {{0, 40, 41}, {0, 7, 99}});
  hx.store(kinds, &mass, 3);
  const std::vector<std::vector<int64_t>> pivots = {{0, 40, 41}, {0, 7, 99}};
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(hx.count(h, akvq::kTagText), 0);  // PSA: no 4-bit class
    EXPECT_EQ(hx.count(h, akvq::kTagPivot), 3);
    EXPECT_EQ(hx.count(h, akvq::kTagLow), 97);
    for (bool key : {true, false})
      EXPECT_EQ(hx.stored(h, akvq::kTagPivot, key), f16_round(hx.input(h, pivots[h], key))) << "head " << h;
  }
}

TEST(AkvqStore, AutoDetectsTsaFromSpreadTextAttention) {
  LayerHarness hx("akvq_vl:n_pivots=4,window=0", 3);  // layer 3: PSA in the map, TSA by its statistics
  const auto kinds = kinds_of({{kT, 20}, {kV, 80}, {kT, 20}});
  std::vector<float> mass;
  for (int h = 0; h < 2; ++h) {
    auto m = flat_mass(kinds, 1.0f, 0.05f);
    mass.insert(mass.end(), m.begin(), m.end());
  }
  hx.store(kinds, &mass, 5);
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(hx.count(h, akvq::kTagText), 40);
    EXPECT_EQ(hx.count(h, akvq::kTagLow), 80);
    EXPECT_EQ(hx.count(h, akvq::kTagPivot), 0);  // pivots are chosen but TSA folds by kind
  }
  // A later decode token (no statistics from a one-token step) keeps the decision.
  for (int s = 0; s < 3; ++s) hx.store({kT}, nullptr, 100 + s);
  EXPECT_EQ(hx.count(0, akvq::kTagText), 43);
}

TEST(AkvqStore, WithoutStatisticsTheMapAndTheFirstTokensArePivots) {
  // Layer 1: TSA in the map; layer 2: PSA with the first n_pivots tokens (sinks) in f16.
  const auto kinds = kinds_of({{kT, 5}, {kV, 50}, {kT, 5}});
  LayerHarness tsa("akvq_vl:n_pivots=8,window=0", 1), psa("akvq_vl:n_pivots=8,window=0", 2);
  tsa.store(kinds, nullptr, 9);
  psa.store(kinds, nullptr, 9);
  EXPECT_EQ(tsa.count(0, akvq::kTagText), 10);
  EXPECT_EQ(tsa.count(0, akvq::kTagPivot), 0);
  std::vector<int64_t> first8(8);
  std::iota(first8.begin(), first8.end(), 0);
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(psa.count(h, akvq::kTagPivot), 8);
    EXPECT_EQ(psa.count(h, akvq::kTagLow), 52);
    EXPECT_EQ(psa.stored(h, akvq::kTagPivot, true), f16_round(psa.input(h, first8, true)));
  }
  // pattern=psa everywhere, pattern=tsa everywhere.
  LayerHarness forced_psa("akvq_vl:pattern=psa,n_pivots=8,window=0", 0), forced_tsa("akvq_vl:pattern=tsa,window=0", 3);
  forced_psa.store(kinds, nullptr, 9);
  forced_tsa.store(kinds, nullptr, 9);
  EXPECT_EQ(forced_psa.count(1, akvq::kTagPivot), 8);
  EXPECT_EQ(forced_tsa.count(1, akvq::kTagText), 10);
}

TEST(AkvqStore, PivotBudgetAcrossPrefillChunksAndWindowCandidates) {
  // n_pivots 4, window 16 (folded 32 rows at a time).
  LayerHarness hx("akvq_vl:n_pivots=4,window=16,pattern=psa", 0, 1);
  // Chunk 1: 60 tokens, only tokens 1 and 50 have mass: 2 pivots, budget 2 left. 60 >= 16 + 32:
  // rows 0..31 fold (token 1 to kPivot), 28 stay in the window.
  std::vector<float> m1(60, 0.0f);
  m1[1] = 10;
  m1[50] = 5;
  hx.store(kinds_of({{kV, 60}}), &m1, 11);
  EXPECT_EQ(hx.count(0, akvq::kTagPivot), 1);
  EXPECT_EQ(hx.count(0, akvq::kTagLow), 31);
  EXPECT_EQ(hx.count(0, akvq::kTagWindow), 28);
  // Chunk 2: 10 tokens. Keys in storage order (AttentionStats): the cached rows as
  // stored_positions lists them (pivot, 2-bit tiles, staging, window: the segment order),
  // then the new tokens 60..69. Top 4: token 1 (a pivot already), token 5 (folded: cannot
  // be promoted), window token 40, new token 65; token 66 is 5th and does not qualify.
  const std::vector<int64_t> order = hx.storage_order(0);
  auto key_of = [&](int64_t t) { return t >= 60 ? t : std::find(order.begin(), order.end(), t) - order.begin(); };
  ASSERT_EQ(order.size(), 60u);
  EXPECT_NE(key_of(1), 1);  // not sequence order: the pivot's segment came first
  std::vector<float> m2(70, 0.0f);
  m2[key_of(1)] = 10;
  m2[key_of(5)] = 9;
  m2[key_of(40)] = 8;
  m2[key_of(65)] = 7;
  m2[key_of(66)] = 6;
  hx.store(kinds_of({{kV, 10}}), &m2, 12);
  // Decode: 200 tokens with statistics that would make every one a pivot: one-token
  // steps never choose pivots (and the budget is spent anyway).
  for (int s = 0; s < 200; ++s) {
    std::vector<float> m(static_cast<size_t>(hx.n + 1), 0.0f);
    m.back() = 100;
    hx.store({kT}, &m, 1000 + s);
  }
  EXPECT_EQ(hx.count(0, akvq::kTagPivot), 4);
  for (bool key : {true, false})
    EXPECT_EQ(hx.stored(0, akvq::kTagPivot, key), f16_round(hx.input(0, {1, 40, 50, 65}, key)));
}

// The statistics list cached keys in storage order, which the staging and the pivot
// segments make differ from sequence order; detection must read each key's kind there.
TEST(AkvqStore, DetectionReadsKindsInStorageOrder) {
  LayerHarness hx("akvq_vl:n_pivots=1,window=16", 3, 1);  // layer 3: PSA in the map
  // Chunk 1: visual 0..41, text 42..59; token 40 the sink: PSA, pivot 40. Rows 0..31 fold.
  std::vector<float> m1(60, 0.01f);
  m1[40] = 100;
  hx.store(kinds_of({{kV, 42}, {kT, 18}}), &m1, 31);
  // Chunk 2 (no statistics): rows 32..63 fold - 32..39 staged, 40 to the pivots, 41..63:
  // a tile (32..39, 41..48) and a new staging segment (49..63) after the pivot's.
  hx.store(kinds_of({{kT, 40}}), nullptr, 32);
  const std::vector<int64_t> order = hx.storage_order(0);
  ASSERT_EQ(order.size(), 100u);
  EXPECT_EQ(order[40], 41);  // key 41 is text token 42: the kind that decides below
  EXPECT_EQ(order[41], 42);
  EXPECT_EQ(order[48], 40);
  // Chunk 3: the mass on key 0 (visual, the top-1 pivot: 1.5) against text keys 41 and 50
  // (1.0 + 0.6): text-salient. Read in sequence order, key 41 would be visual token 41
  // (text 0.6 < 1.5: PSA).
  std::vector<float> m3(110, 0.0f);
  m3[0] = 1.5f;
  m3[41] = 1.0f;
  m3[50] = 0.6f;
  hx.store(kinds_of({{kT, 10}}), &m3, 33);
  EXPECT_EQ(hx.count(0, akvq::kTagText), 0);
  for (int s = 0; s < 2; ++s) hx.store({kT}, nullptr, 40 + s);  // the window folds 64..95: text, TSA
  EXPECT_EQ(hx.count(0, akvq::kTagText), 32);
}

TEST(AkvqStore, PivotsStayF16AfterManyDecodeStepsAndTheWindowFolds) {
  LayerHarness hx("akvq_vl:n_pivots=16,window=40", 2);
  const auto kinds = kinds_of({{kT, 10}, {kV, 200}, {kT, 10}});
  std::vector<std::vector<int64_t>> heavy(2);
  for (int i = 0; i < 16; ++i) {
    heavy[0].push_back(i * 13);       // spread over the prompt
    heavy[1].push_back(219 - i * 7);  // some of them still in the window after the prefill
  }
  const auto mass = mass_with(2, 220, 0.1f, heavy);
  hx.store(kinds, &mass, 21);
  for (int s = 0; s < 1000; ++s) {
    hx.store({kT}, nullptr, 5000 + s);
    const int64_t n = hx.n, window = n < 72 ? n : 40 + (n - 40) % 32;
    ASSERT_EQ(hx.count(0, akvq::kTagWindow), window) << "after " << n << " tokens";
  }
  for (int h = 0; h < 2; ++h) {
    std::vector<int64_t> p = heavy[h];
    std::sort(p.begin(), p.end());
    EXPECT_EQ(hx.count(h, akvq::kTagPivot), 16);
    EXPECT_EQ(hx.count(h, akvq::kTagText), 0);
    for (bool key : {true, false}) EXPECT_EQ(hx.stored(h, akvq::kTagPivot, key), f16_round(hx.input(h, p, key)));
    EXPECT_EQ(hx.positions(h)[akvq::kTagPivot], p);
    // The window: the last rows in f16, sequence order.
    const int64_t w = hx.count(h, akvq::kTagWindow);
    std::vector<int64_t> last(w);
    std::iota(last.begin(), last.end(), hx.n - w);
    EXPECT_EQ(hx.stored(h, akvq::kTagWindow, false), f16_round(hx.input(h, last, false)));
    EXPECT_EQ(hx.count(h, akvq::kTagLow) + 16 + w, hx.n);
  }
}

TEST(AkvqStore, BytesForTokensIsExactWithoutStatistics) {
  // Visual tokens, no statistics: the accounting's setting. 4 layers (2 TSA, 2 PSA by the map).
  // (2-bit tiles with f16 staging; the last spec keeps rows.)
  for (const char* spec : {"akvq_vl:window=40,n_pivots=16", "akvq_vl:window=0,n_pivots=5,pattern=psa",
                           "akvq_vl:window=128,pattern=tsa", "akvq_vl:window=8,n_pivots=3,bits=3"}) {
    std::vector<std::unique_ptr<LayerHarness>> layers;
    for (int l = 0; l < 4; ++l) layers.push_back(std::make_unique<LayerHarness>(spec, l));
    const auto& method = *layers[0]->method;
    for (int step = 0; step < 60; ++step) {
      const int n_new = step == 0 ? 37 : step % 7 == 0 ? 50 : 1;
      double held = 0;
      for (auto& l : layers) {
        l->store(kinds_of({{kV, n_new}}), nullptr, 300 + step);
        held += l->bytes();
      }
      ASSERT_DOUBLE_EQ(held, method.bytes_for_tokens(layers[0]->n)) << spec << " at " << layers[0]->n << " tokens";
      ASSERT_LE(method.min_bytes_for_tokens(layers[0]->n), held);
    }
  }
  // Without pivots (pattern=tsa, visual tokens) the bounds meet.
  auto tsa = create_method("akvq_vl:pattern=tsa", KvGeometry{4, 4, 2, kD});
  ASSERT_TRUE(tsa.is_ok());
  EXPECT_DOUBLE_EQ((*tsa)->min_bytes_for_tokens(1000), (*tsa)->bytes_for_tokens(1000));
  auto psa = create_method("akvq_vl:pattern=psa", KvGeometry{4, 4, 2, kD});
  ASSERT_TRUE(psa.is_ok());
  EXPECT_LT((*psa)->min_bytes_for_tokens(1000), (*psa)->bytes_for_tokens(1000));
}

TEST(AkvqStore, DeclaredRmsErrorHoldsAndShrinksWithBits) {
  double previous = 1.0;
  for (int bits : {2, 3, 4}) {
    const std::string spec = "akvq_vl:pattern=tsa,window=0,text_bits=4,bits=" + std::to_string(bits);
    LayerHarness hx(spec, 0, 1);
    hx.store(kinds_of({{kV, 512}}), nullptr, 40 + bits);
    std::vector<int64_t> all(512);
    std::iota(all.begin(), all.end(), 0);
    const double bound = hx.method->rms_error_bound();
    const double ek = rel_rms(hx.stored(0, akvq::kTagLow, true), hx.input(0, all, true));
    const double ev = rel_rms(hx.stored(0, akvq::kTagLow, false), hx.input(0, all, false));
    std::printf("%s: relative RMS K %.3f V %.3f (declared %.3f)\n", spec.c_str(), ek, ev, bound);
    EXPECT_LE(ek, bound);
    EXPECT_LE(ev, bound);
    EXPECT_LT(ek, previous);
    previous = ek;
  }
  auto loose = create_method("akvq_vl:clip=0.3", KvGeometry{2, 4, 2, kD});
  ASSERT_TRUE(loose.is_ok());
  EXPECT_LT((*loose)->rms_error_bound(), 0.0);  // not declared away from the default clipping
}

// ---------------- through KvCache ----------------

// Tolerance of attention outputs (rel_err: max error / max |output|) against a double
// reference over the stored rows: f32 sums (1e-4), or 5e-3 where the tiled codes' VNNI ops
// round their inputs (Codec::fused_rounding: queries to 15 bits, probabilities to 14), the
// conformance test's bar. Measured 3.6e-3 below, mostly the query rounding (a logit error
// ~1e-4 RMS moves the output by a share of max |v|), relative to outputs that average
// ~160 random rows (max |out| ~0.1 max |v|); the 2-bit codes themselves change it ~0.3.
double stored_rows_tolerance(const std::string& method, const KvGeometry& g) {
  auto m = create_method(method, g);
  EXPECT_TRUE(m.is_ok());
  for (const Codec* c : (*m)->codecs()) {
    const Codec::FusedRounding r = c->fused_rounding(g.head_dim);
    // 15/14-bit rounding: 5e-3; 8/7 bits (the 2-bit classes' default dot=8): 0.1 (measured 0.039).
    if (r.query_bits || r.prob_bits) return r.query_bits == 8 || r.prob_bits == 7 ? 0.1 : 5e-3;
  }
  return 1e-4;
}

TEST(AkvqCache, VlmPromptThenDecodeAttendsOverWhatIsStored) {
  ThreadPool pool(2);
  const KvGeometry g{3, 4, 2, kD};
  const std::string method = "akvq_vl:window=16,n_pivots=4,tsa_layers=1";
  auto created = kvtest::small_page_cache(method, g);
  ASSERT_TRUE(created);
  KvCache& cache = *created;
  const SeqId seq = cache.add_sequence().value();
  const float scale = 0.125f;
  const double tol = stored_rows_tolerance(method, g);
  double worst = 0;
  // The engine's chunks: text, image, text; then decode.
  std::vector<std::pair<TokenKind, int>> steps = {{kT, 12}, {kV, 100}, {kT, 9}};
  for (int s = 0; s < 40; ++s) steps.push_back({kT, 1});
  uint32_t seed = 1;
  for (auto [kind, n_new] : steps) {
    const std::vector<TokenKind> kinds(n_new, kind);
    for (int l = 0; l < g.n_layers; ++l) {
      const auto q = random_vec(static_cast<size_t>(n_new) * g.n_heads * kD, seed++, -2.0f, 2.0f);
      const auto k = random_vec(static_cast<size_t>(n_new) * g.n_kv_heads * kD, seed++, -2.0f, 2.0f);
      const auto v = random_vec(k.size(), seed++, -1.0f, 1.0f);
      std::vector<std::vector<float>> sk(2), sv(2);
      for (int h = 0; h < 2; ++h) ASSERT_TRUE(cache.read_back(seq, l, h, &sk[h], &sv[h]).is_ok());
      std::vector<float> out(q.size());
      ASSERT_TRUE(cache.attend(seq, l, q.data(), k.data(), v.data(), kinds.data(), n_new, scale, out.data(), pool).is_ok());
      // The last new token of each query head vs a double reference over the stored rows
      // (storage order: attention does not depend on it) plus the step's exact rows.
      for (int qh = 0; qh < g.n_heads; ++qh) {
        const int h = qh / 2;
        std::vector<float> keys = sk[h], vals = sv[h];
        for (int i = 0; i < n_new; ++i) {
          keys.insert(keys.end(), &k[(i * 2 + h) * kD], &k[(i * 2 + h) * kD] + kD);
          vals.insert(vals.end(), &v[(i * 2 + h) * kD], &v[(i * 2 + h) * kD] + kD);
        }
        std::vector<double> ref(kD);
        const size_t row = (static_cast<size_t>(n_new - 1) * g.n_heads + qh) * kD;
        kvtest::ref_attention_row(&q[row], keys.data(), vals.data(), static_cast<int64_t>(keys.size()) / kD, kD, scale,
                                  ref.data());
        const double err = kvtest::rel_err(&out[row], ref.data(), kD);
        worst = std::max(worst, err);
        ASSERT_LT(err, tol) << "layer " << l << " head " << qh;
      }
    }
    cache.commit(seq, n_new);
  }
  std::printf("attention vs the stored rows: max rel err %.3g (tolerance %.3g)\n", worst, tol);
  EXPECT_EQ(cache.n_tokens(seq), 161);
  EXPECT_EQ(cache.sequence_bytes(seq), cache.bytes_in_use());
  // Copy continues identically.
  const SeqId b = cache.add_sequence().value();
  ASSERT_TRUE(cache.copy_sequence(seq, b).is_ok());
  std::vector<float> ka, va, kb, vb;
  for (int l = 0; l < 3; ++l) {
    ASSERT_TRUE(cache.read_back(seq, l, 1, &ka, &va).is_ok());
    ASSERT_TRUE(cache.read_back(b, l, 1, &kb, &vb).is_ok());
    EXPECT_EQ(ka, kb);
    EXPECT_EQ(va, vb);
  }
}

TEST(AkvqCache, ProbeStatisticsMakeTheSinkAPivotKeptInF16) {
  // One layer; every query leans on a direction that key 5 (a "massive activation") shares
  // scaled up, so the probes put most of their mass on it: auto calls the layer PSA and
  // keeps token 5 in f16 after it leaves the window, while the other tokens go to 2 bits.
  ThreadPool pool(1);
  KvCacheConfig kc;
  kc.geometry = KvGeometry{1, 2, 1, kD};
  kc.method = "akvq_vl:window=16,n_pivots=2";
  kc.page_bytes = 4096;
  kc.budget_bytes = 64 << 20;
  auto created = KvCache::create(kc);
  ASSERT_TRUE(created.is_ok()) << created.status().message();
  KvCache& cache = **created;
  const SeqId seq = cache.add_sequence().value();
  auto step = [&](int n, uint32_t seed, const std::vector<float>& k) {
    auto q = random_vec(static_cast<size_t>(n) * 2 * kD, seed, -0.5f, 0.5f);
    for (size_t i = 0; i < q.size(); i += kD) q[i] += 2.0f;  // channel 0
    const auto v = random_vec(static_cast<size_t>(n) * kD, seed + 1, -1.0f, 1.0f);
    std::vector<float> out(q.size());
    const std::vector<TokenKind> kinds(n, kV);
    ASSERT_TRUE(cache.attend(seq, 0, q.data(), k.data(), v.data(), kinds.data(), n, 0.125f, out.data(), pool).is_ok());
    cache.commit(seq, n);
  };
  auto k0 = random_vec(200 * kD, 7, -1.0f, 1.0f);
  for (int i = 0; i < kD; ++i) k0[5 * kD + i] = i == 0 ? 60.0f : 0.5f * k0[5 * kD + i];
  step(200, 1, k0);
  for (int s = 0; s < 40; ++s) step(1, 100 + s, random_vec(kD, 500 + s, -1.0f, 1.0f));
  std::vector<float> k, v;
  ASSERT_TRUE(cache.read_back(seq, 0, 0, &k, &v).is_ok());
  const std::vector<float> sink = f16_round(std::vector<float>(k0.begin() + 5 * kD, k0.begin() + 6 * kD));
  int exact_rows = 0;  // stored rows equal to f16(key 5): the pivot (the window is long gone past it)
  for (size_t r = 0; r * kD < k.size(); ++r) exact_rows += std::equal(sink.begin(), sink.end(), k.begin() + r * kD);
  EXPECT_EQ(exact_rows, 1);
  // read_back is in sequence order (Method::stored_positions): the pivot is row 5, and the
  // other rows are their own tokens' (2-bit: within the codec's reach of them).
  EXPECT_TRUE(std::equal(sink.begin(), sink.end(), k.begin() + 5 * kD));
  EXPECT_LT(rel_rms(std::vector<float>(k.begin(), k.begin() + 5 * kD), std::vector<float>(k0.begin(), k0.begin() + 5 * kD)),
            kInt2Rms);
  // Without statistics (pattern=map: layer 0 is TSA, no pivots) the same row is 2-bit.
  KvCacheConfig plain = kc;
  plain.method = "akvq_vl:window=16,n_pivots=2,pattern=map,tsa_layers=1";
  auto other = KvCache::create(plain);
  ASSERT_TRUE(other.is_ok());
  const SeqId s2 = (*other)->add_sequence().value();
  auto q = random_vec(200 * 2 * kD, 1, -0.5f, 0.5f);
  const auto v0 = random_vec(200 * kD, 2, -1.0f, 1.0f);
  std::vector<float> out(q.size());
  const std::vector<TokenKind> kinds(200, kV);
  ASSERT_TRUE((*other)->attend(s2, 0, q.data(), k0.data(), v0.data(), kinds.data(), 200, 0.125f, out.data(), pool).is_ok());
  (*other)->commit(s2, 200);
  ASSERT_TRUE((*other)->read_back(s2, 0, 0, &k, &v).is_ok());
  EXPECT_FALSE(std::equal(sink.begin(), sink.end(), k.begin() + 5 * kD));
}

}  // namespace
}  // namespace vlkv
