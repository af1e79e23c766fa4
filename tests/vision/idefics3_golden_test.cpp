// SmolVLM/Idefics3 projector against llama.cpp (tests/data/fixtures/vlm/idefics3):
// preprocessed tiles, pixel-shuffled ViT output, image embeddings and the token layout.
#include <gtest/gtest.h>

#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/idefics3_model.h"
#include "vision/vision_model.h"
#include "vlm_fixture_util.h"

namespace vlkv {
namespace {

using vlm_test::fixtures;
using vlm_test::max_abs_diff;

const std::string kRun = "/vlm/idefics3/kv-f32_fa-off/vlm_p1";

struct Idefics3Fixture : testing::Test {
  void SetUp() override {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(fixtures() + "/models/mmproj-tiny-idefics3.gguf");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    gguf = std::move(g).value();
    Result<Idefics3Projector> p = Idefics3Projector::load(*gguf);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    proj = std::make_unique<Idefics3Projector>(std::move(p).value());
    image = vlm_test::test_image();
    ASSERT_TRUE(image.valid());
  }
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Idefics3Projector> proj;
  Image image;
  ThreadPool pool{2};
};

TEST_F(Idefics3Fixture, PreprocessMatchesLlamaCpp) {
  const VitHparams& hp = proj->hparams();
  Result<Idefics3Tiles> tiles = idefics3_preprocess(image, hp.image_size, proj->longest_edge(), hp.image_mean,
                                                    hp.image_std);
  ASSERT_TRUE(tiles.is_ok());
  EXPECT_EQ(tiles->grid_rows, 2);
  EXPECT_EQ(tiles->grid_cols, 2);
  ASSERT_EQ(tiles->tensors.size(), 5u);
  const std::vector<float> ref = vlm_test::read_f32(fixtures() + kRun + ".preproc.f32");
  ASSERT_EQ(ref.size(), 5u * 3 * 32 * 32);
  double worst = 0;
  for (size_t t = 0; t < 5; ++t) {
    ASSERT_EQ(tiles->tensors[t].data.size(), 3u * 32 * 32);
    const double d = max_abs_diff(tiles->tensors[t].data.data(), &ref[t * 3 * 32 * 32], 3 * 32 * 32);
    EXPECT_LE(d, 1e-6) << "tile " << t;
    worst = std::max(worst, d);
  }
  RecordProperty("preproc_max_abs", std::to_string(worst));
}

TEST_F(Idefics3Fixture, PixelShuffleAndEmbeddingsMatchLlamaCpp) {
  // Encode the fixture's own preprocessed tiles, so this stage is tested on its own.
  const std::vector<float> pre = vlm_test::read_f32(fixtures() + kRun + ".preproc.f32");
  const std::vector<float> ref_shuf = vlm_test::read_f32(fixtures() + kRun + ".pixel_shuffle.f32");
  const std::vector<float> ref_embd = vlm_test::read_f32(fixtures() + kRun + ".image_embd.f32");
  ASSERT_EQ(ref_shuf.size(), 20u * 128);
  ASSERT_EQ(ref_embd.size(), 20u * 64);
  EXPECT_EQ(proj->tokens_per_tile(), 4);
  EXPECT_EQ(proj->n_embd_out(), 64);
  double worst_shuf = 0, worst_embd = 0;
  for (size_t t = 0; t < 5; ++t) {
    ImageTensor tile;
    tile.width = tile.height = 32;
    tile.data.assign(pre.begin() + t * 3072, pre.begin() + (t + 1) * 3072);
    std::vector<float> shuf, embd;
    ASSERT_TRUE(proj->encode_tile(tile, &shuf, embd, pool).is_ok());
    ASSERT_EQ(shuf.size(), 4u * 128);
    ASSERT_EQ(embd.size(), 4u * 64);
    worst_shuf = std::max(worst_shuf, max_abs_diff(shuf.data(), &ref_shuf[t * 512], 512));
    worst_embd = std::max(worst_embd, max_abs_diff(embd.data(), &ref_embd[t * 256], 256));
  }
  std::printf("idefics3: pixel_shuffle max abs %.3g, image_embd max abs %.3g\n", worst_shuf, worst_embd);
  EXPECT_LE(worst_shuf, 1e-4);
  EXPECT_LE(worst_embd, 1e-4);
}

// No fixture has a non-square image; libmtmd's img_tool::resize (PAD_CEIL, the refined
// image's default) scales by min(W/w, H/h), rounds each side up (capped at the canvas) and
// centres the result with offset (canvas - side) / 2 on black. 100x40 -> canvas 64x32, scale
// 0.64, content 64x26 at y = 3: rows 0-2 and 29-31 of both tiles are black. 40x100 -> 32x64,
// content 26x64 at x = 3: columns 0-2 and 29-31 black. Every other pixel is bright here.
TEST_F(Idefics3Fixture, NonSquareRefinedImageIsPaddedAsLibmtmd) {
  const VitHparams& hp = proj->hparams();
  for (const bool landscape : {true, false}) {
    SCOPED_TRACE(landscape ? "100x40" : "40x100");
    Image img;
    img.width = landscape ? 100 : 40;
    img.height = landscape ? 40 : 100;
    img.pixels.assign(static_cast<size_t>(img.width) * img.height * 3, 200);
    Result<Idefics3Tiles> tiles = idefics3_preprocess(img, hp.image_size, proj->longest_edge(), hp.image_mean,
                                                      hp.image_std);
    ASSERT_TRUE(tiles.is_ok());
    EXPECT_EQ(tiles->grid_rows, landscape ? 1 : 2);
    EXPECT_EQ(tiles->grid_cols, landscape ? 2 : 1);
    ASSERT_EQ(tiles->tensors.size(), 3u);
    for (size_t t = 0; t < 2; ++t) {
      const ImageTensor& tile = tiles->tensors[t];
      ASSERT_EQ(tile.width, 32);
      ASSERT_EQ(tile.height, 32);
      for (int c = 0; c < 3; ++c) {
        const float black = (0.0f - hp.image_mean[c]) / hp.image_std[c];
        for (int y = 0; y < 32; ++y) {
          for (int x = 0; x < 32; ++x) {
            const int across = landscape ? y : x;  // the padded direction
            const bool pad = across < 3 || across >= 29;
            const float v = tile.data[(static_cast<size_t>(c) * 32 + y) * 32 + x];
            if (pad) EXPECT_EQ(v, black) << "tile " << t << " c " << c << " (" << x << ", " << y << ")";
            else EXPECT_GT(v, black + 0.5f) << "tile " << t << " c " << c << " (" << x << ", " << y << ")";
          }
        }
      }
    }
    // The global image is a plain bilinear resize to 32x32: no padding.
    const std::vector<float>& global = tiles->tensors[2].data;
    ASSERT_EQ(global.size(), 3u * 32 * 32);
    for (size_t i = 0; i < global.size(); ++i) {
      const size_t c = i / (32 * 32);
      EXPECT_GT(global[i], (0.0f - hp.image_mean[c]) / hp.image_std[c] + 0.5f) << i;
    }
  }
}

TEST(Idefics3Layout, GridTwoByTwoMatchesLibmtmd) {
  const std::vector<Idefics3LayoutItem> items = idefics3_token_layout(2, 2);
  std::vector<std::string> flat;  // special tokens, images as "[t]"
  for (const Idefics3LayoutItem& it : items) {
    if (it.tile >= 0) {  // built piecewise: GCC 12 warns falsely (-Wrestrict) on "lit" + std::string&&
      std::string image = "[";
      image += std::to_string(it.tile);
      image += ']';
      flat.push_back(image);
    }
    for (const std::string& s : it.tokens) flat.push_back(s);
  }
  const std::string f = "<fake_token_around_image>";
  const std::vector<std::string> expect = {f, "<row_1_col_1>", "[0]", f, "<row_1_col_2>", "[1]", "\n",
                                           f, "<row_2_col_1>", "[2]", f, "<row_2_col_2>", "[3]", "\n\n",
                                           f, "<global-img>", "[4]", f};
  EXPECT_EQ(flat, expect);
}

TEST_F(Idefics3Fixture, VisionModelEncodesTheImageAsTheFixture) {
  Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(*gguf);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  EXPECT_EQ((*vm)->projector_type(), "idefics3");
  EXPECT_EQ((*vm)->n_embd_out(), 64);
  Result<MediaEmbedding> e = (*vm)->encode_image(image, pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_EQ(e->n_visual_tokens(), 20);
  const std::vector<float> ref_embd = vlm_test::read_f32(fixtures() + kRun + ".image_embd.f32");
  std::vector<float> all;
  std::vector<std::string> texts;  // "text:..." tokenized, "vocab:a|b" looked up token by token
  for (const MediaPiece& p : e->pieces) {
    if (p.kind == MediaPiece::Kind::kEmbeddings) {
      EXPECT_EQ(p.embd.n_tokens, 4);
      EXPECT_EQ(p.embd.grid_h * p.embd.grid_w, 4);
      all.insert(all.end(), p.embd.data.begin(), p.embd.data.end());
    } else if (p.kind == MediaPiece::Kind::kText) {
      texts.push_back("text:" + p.text);
    } else {
      std::string joined = "vocab:";
      for (size_t i = 0; i < p.vocab_tokens.size(); ++i) joined += (i ? "|" : "") + p.vocab_tokens[i];
      texts.push_back(joined);
    }
  }
  ASSERT_EQ(all.size(), ref_embd.size());
  EXPECT_LE(max_abs_diff(all.data(), ref_embd.data(), all.size()), 1e-4);
  // libmtmd: tile headers come from a tokenized template, "\n" and the global image's frame
  // from lookup_token.
  const std::vector<std::string> expect_texts = {
      "text:<fake_token_around_image><row_1_col_1>",  "text:<fake_token_around_image><row_1_col_2>",
      "vocab:\n",                                     "text:<fake_token_around_image><row_2_col_1>",
      "text:<fake_token_around_image><row_2_col_2>",  "vocab:\n\n|<fake_token_around_image>|<global-img>",
      "vocab:<fake_token_around_image>"};
  EXPECT_EQ(texts, expect_texts);
}

}  // namespace
}  // namespace vlkv
