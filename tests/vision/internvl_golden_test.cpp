// InternVL projector against llama.cpp (tests/data/fixtures/vlm/internvl, README-batch2):
// tile grid choice, preprocessed tiles (preproc.f32), image embeddings (image_embd.f32), the
// <img> ... </img> layout, and the refusal of tensors and keys this encoder does not implement.
//
// Tolerances (README-batch2 "How to compare"): preproc 1e-6 (same resize arithmetic as
// libmtmd, only float rounding differs; measured 0); image_embd 1.5e-3 max abs: we reproduce
// ggml's f16 rounding of the patch conv and the GELU table, so only activations on an f16
// rounding boundary differ (README: all within ~1.5e-3; measured 2.4e-5 and 3.5e-4; plain f32
// conv gave 2.0e-3); a wrong token order, CLS placement or shuffle gives 0.5 and more.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "vision/internvl_model.h"
#include "vision/vision_model.h"
#include "vlm_fixture_util.h"

namespace vlkv {
namespace {

using vlm_test::fixtures;
using vlm_test::max_abs_diff;

constexpr size_t kTileFloats = 3 * 32 * 32;

std::string run_base(const std::string& run) { return fixtures() + "/vlm/internvl/kv-f32_fa-off/" + run; }

Image fixture_image(const std::string& run) {
  const nlohmann::json j = vlm_test::read_json(run_base(run) + ".json");
  Result<Image> img = load_image(fixtures() + "/images/" + j["image"].get<std::string>());
  EXPECT_TRUE(img.is_ok()) << img.status().message();
  return img.is_ok() ? *img : Image{};
}

struct InternvlFixture : testing::Test {
  void SetUp() override {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(fixtures() + "/models/mmproj-tiny-internvl.gguf");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    gguf = std::move(g).value();
    Result<InternvlProjector> p = InternvlProjector::load(*gguf);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    proj = std::make_unique<InternvlProjector>(std::move(p).value());
  }
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<InternvlProjector> proj;
  ThreadPool pool{2};
};

// clip.cpp's set_internvl_dhr_res_candidates for min 1, max 12: a in 1..12, b in 1..12/a.
TEST(InternvlCandidates, MatchClipCppOrder) {
  const std::vector<ImageSize> c = internvl_resolution_candidates(32, 1, 12, {});
  size_t expect_n = 0;
  for (int a = 1; a <= 12; ++a) expect_n += static_cast<size_t>(12 / a);
  ASSERT_EQ(c.size(), expect_n);  // 35
  EXPECT_EQ(c.front(), (ImageSize{32, 32}));
  EXPECT_EQ(c[1], (ImageSize{32, 64}));
  EXPECT_EQ(c.back(), (ImageSize{384, 32}));
  // Pinpoints come first. clip.cpp also clamps b to >= min_tiles (not a*b >= min), so min 2,
  // max 4 leaves only 2x2: 2x1, 3x1 and 4x1 are not candidates.
  const std::vector<ImageSize> d = internvl_resolution_candidates(32, 2, 4, {{96, 32}});
  const std::vector<ImageSize> expect = {{96, 32}, {64, 64}};
  EXPECT_EQ(d, expect);
}

TEST_F(InternvlFixture, GridChoiceAsLlamaCpp) {
  EXPECT_EQ(proj->scale_factor(), 2);
  EXPECT_EQ(proj->tokens_per_tile(), 4);
  EXPECT_EQ(proj->n_embd_out(), 128);
  // 64x64: 2x2 (no waste); 128x48: 4x2 (128x64 keeps all pixels, least padding);
  // llava's rule, not HF InternVL's closest-aspect-ratio one (which would give 5x2 for 128x48).
  const std::vector<std::pair<std::string, std::pair<int, int>>> cases = {{"vlm_p1", {2, 2}},
                                                                         {"vlm_p1_wide", {2, 4}}};
  for (const auto& [run, grid] : cases) {
    Result<InternvlTiles> t = proj->preprocess(fixture_image(run));
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    EXPECT_EQ(t->grid_rows, grid.first) << run;
    EXPECT_EQ(t->grid_cols, grid.second) << run;
    EXPECT_EQ(t->tensors.size(), static_cast<size_t>(grid.first * grid.second + 1)) << run;
  }
  // An image within one tile: the overview only.
  Image small;
  small.width = 20;
  small.height = 32;
  small.pixels.assign(20 * 32 * 3, 100);
  Result<InternvlTiles> t = proj->preprocess(small);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->grid_rows, 0);
  EXPECT_EQ(t->tensors.size(), 1u);
}

TEST_F(InternvlFixture, PreprocessMatchesLlamaCpp) {
  for (const std::string run : {"vlm_p1", "vlm_p1_wide"}) {
    SCOPED_TRACE(run);
    Result<InternvlTiles> t = proj->preprocess(fixture_image(run));
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    const std::vector<float> ref = vlm_test::read_f32(run_base(run) + ".preproc.f32");
    ASSERT_EQ(ref.size(), t->tensors.size() * kTileFloats);
    double worst = 0;
    for (size_t i = 0; i < t->tensors.size(); ++i) {
      ASSERT_EQ(t->tensors[i].data.size(), kTileFloats);
      const double d = max_abs_diff(t->tensors[i].data.data(), &ref[i * kTileFloats], kTileFloats);
      EXPECT_LE(d, 1e-6) << "tile " << i;
      worst = std::max(worst, d);
    }
    std::printf("internvl %s: preproc max abs %.3g over %zu tiles\n", run.c_str(), worst, t->tensors.size());
  }
}

// The fixture's own tiles through our encoder: the ViT + shuffle + projector alone.
TEST_F(InternvlFixture, EmbeddingsFromFixtureTilesMatchLlamaCpp) {
  for (const std::string run : {"vlm_p1", "vlm_p1_wide"}) {
    SCOPED_TRACE(run);
    const std::vector<float> pre = vlm_test::read_f32(run_base(run) + ".preproc.f32");
    const std::vector<float> ref = vlm_test::read_f32(run_base(run) + ".image_embd.f32");
    const size_t n_tiles = pre.size() / kTileFloats;
    const size_t per_tile = 4 * 128;
    ASSERT_EQ(ref.size(), n_tiles * per_tile);
    double worst = 0;
    for (size_t i = 0; i < n_tiles; ++i) {
      ImageTensor tile;
      tile.width = tile.height = 32;
      tile.data.assign(pre.begin() + static_cast<ptrdiff_t>(i * kTileFloats),
                       pre.begin() + static_cast<ptrdiff_t>((i + 1) * kTileFloats));
      std::vector<float> embd;
      ASSERT_TRUE(proj->encode_tile(tile, embd, pool).is_ok());
      ASSERT_EQ(embd.size(), per_tile);
      worst = std::max(worst, max_abs_diff(embd.data(), &ref[i * per_tile], per_tile));
    }
    std::printf("internvl %s: image_embd max abs %.3g (from the fixture's tiles)\n", run.c_str(), worst);
    EXPECT_LE(worst, 1.5e-3);
  }
}

// End to end through the registry: <img>, one run per tile, the overview last, </img>.
TEST_F(InternvlFixture, VisionModelLayoutAndEmbeddings) {
  Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(*gguf);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  EXPECT_EQ((*vm)->projector_type(), "internvl");
  for (const std::string run : {"vlm_p1", "vlm_p1_wide"}) {
    SCOPED_TRACE(run);
    const nlohmann::json j = vlm_test::read_json(run_base(run) + ".json");
    Result<MediaEmbedding> e = (*vm)->encode_image(fixture_image(run), pool);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    const size_t n_chunks = j["n_image_chunks"].get<size_t>();
    ASSERT_EQ(e->pieces.size(), n_chunks + 2);
    EXPECT_EQ(e->pieces.front().kind, MediaPiece::Kind::kText);
    EXPECT_EQ(e->pieces.front().text, "<img>");
    EXPECT_EQ(e->pieces.back().kind, MediaPiece::Kind::kText);
    EXPECT_EQ(e->pieces.back().text, "</img>");
    std::vector<float> all;
    for (size_t i = 1; i + 1 < e->pieces.size(); ++i) {
      const MediaPiece& p = e->pieces[i];
      ASSERT_EQ(p.kind, MediaPiece::Kind::kEmbeddings);
      EXPECT_EQ(p.embd.n_tokens, 4);
      EXPECT_EQ(p.embd.grid_h, 2);
      EXPECT_EQ(p.embd.grid_w, 2);
      all.insert(all.end(), p.embd.data.begin(), p.embd.data.end());
    }
    EXPECT_EQ(e->n_visual_tokens(), j["n_image_tokens"].get<int64_t>());
    const std::vector<float> ref = vlm_test::read_f32(run_base(run) + ".image_embd.f32");
    ASSERT_EQ(all.size(), ref.size());
    const double d = max_abs_diff(all.data(), ref.data(), all.size());
    std::printf("internvl %s: image_embd max abs %.3g (end to end from the PNG)\n", run.c_str(), d);
    EXPECT_LE(d, 1.5e-3);
  }
}

// The fixture mmproj with one edit, written to a temp file.
std::string rewrite_mmproj(const std::string& name, const std::string& drop_key,
                           const std::vector<std::pair<std::string, GgufValue>>& set,
                           const std::string& extra_tensor = "") {
  Result<std::unique_ptr<GgufFile>> src = GgufFile::open(fixtures() + "/models/mmproj-tiny-internvl.gguf");
  EXPECT_TRUE(src.is_ok());
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) {
    if (key == "general.alignment" || key == drop_key) continue;
    w.set(key, value);
  }
  for (const auto& [key, value] : set) w.set(key, value);
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes).is_ok());
  }
  if (!extra_tensor.empty()) {
    const std::vector<float> ones(32, 1.0f);
    EXPECT_TRUE(w.add_tensor(extra_tensor, GgmlType::kF32, {32}, ones.data(), ones.size() * 4).is_ok());
  }
  const std::string path = ::testing::TempDir() + name;
  EXPECT_TRUE(w.write_to_file(path).is_ok());
  return path;
}

Status load_mmproj(const std::string& path) {
  Result<std::unique_ptr<GgufFile>> g = GgufFile::open(path);
  if (!g.is_ok()) return g.status();
  return VisionModel::load(**g).status();
}

TEST(InternvlRefusals, UnimplementedTensorsAndKeysAreNamed) {
  EXPECT_TRUE(load_mmproj(rewrite_mmproj("internvl_copy.gguf", "", {})).is_ok());
  for (const std::string t : {"v.blk.1.attn_q_norm.weight", "v.blk.0.attn_k_norm.weight",
                              "v.blk.0.attn_post_norm.weight", "v.blk.1.ffn_post_norm.weight",
                              "v.blk.0.out_scale.weight"}) {
    const Status st = load_mmproj(rewrite_mmproj("internvl_extra.gguf", "", {}, t));
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << t << ": " << st.message();
    EXPECT_NE(st.message().find(t), std::string::npos) << st.message();
  }
  const Status gqa =
      load_mmproj(rewrite_mmproj("internvl_gqa.gguf", "", {{"clip.vision.attention.head_count_kv", gguf_u32(1)}}));
  EXPECT_EQ(gqa.code(), StatusCode::kUnsupported) << gqa.message();
  EXPECT_NE(gqa.message().find("head_count_kv"), std::string::npos) << gqa.message();
  // 16 patches per side cannot be shuffled by 3.
  const Status s3 =
      load_mmproj(rewrite_mmproj("internvl_s3.gguf", "", {{"clip.vision.projector.scale_factor", gguf_u32(3)}}));
  EXPECT_FALSE(s3.is_ok());
  EXPECT_NE(s3.message().find("scale_factor"), std::string::npos) << s3.message();
  const Status tiles = load_mmproj(rewrite_mmproj(
      "internvl_tiles.gguf", "", {{"clip.vision.preproc_min_tiles", gguf_u32(5)}, {"clip.vision.preproc_max_tiles", gguf_u32(2)}}));
  EXPECT_FALSE(tiles.is_ok());
  EXPECT_NE(tiles.message().find("preproc_min_tiles"), std::string::npos) << tiles.message();
}

// Without the key llama.cpp keeps n_merge = 1 (no shuffle): mlp.0 must then be n_embd wide,
// so the fixture (mlp.0 of 128 = 32 * 2 * 2) is refused as malformed rather than run.
TEST(InternvlRefusals, MissingScaleFactorMeansNoShuffle) {
  const Status st = load_mmproj(rewrite_mmproj("internvl_noscale.gguf", "clip.vision.projector.scale_factor", {}));
  EXPECT_EQ(st.code(), StatusCode::kInvalidFile) << st.message();
  EXPECT_NE(st.message().find("mm.model.mlp.0.weight"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace vlkv
