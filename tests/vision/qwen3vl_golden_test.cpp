// Qwen3-VL merger ("qwen3vl_merger") against llama.cpp (tests/data/fixtures/vlm/qwen3vl,
// README-batch2): the preprocessed image (aspect-preserving resize + black padding), the
// image embeddings with their deepstack parts (all 384 columns: main | deepstack 1 |
// deepstack 2), and the M-RoPE positions of the image chunk.
//
// Tolerances (README-batch2 "How to compare"): preproc 1e-6 (same bilinear arithmetic as
// libmtmd); image_embd 5e-3 max abs: llama.cpp rounds the patch conv and every GELU to f16
// (item 1), which we do not reproduce, so a correct f32 encoder lands at ~1e-3 of values up
// to ~4 while a wrong order, position grid or deepstack layer is off by 0.1 and more.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/qwen2vl_positions.h"
#include "vision/qwen3vl_model.h"
#include "vision/vision_model.h"
#include "vlkv/media.h"
#include "vlm_fixture_util.h"

namespace vlkv {
namespace {

using vlm_test::fixtures;
using vlm_test::max_abs_diff;

struct Qwen3VlFixture : testing::TestWithParam<const char*> {
  void SetUp() override {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(fixtures() + "/models/mmproj-tiny-qwen3vl.gguf");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    gguf = std::move(g).value();
    Result<Qwen3VlProjector> p = Qwen3VlProjector::load(*gguf);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    proj = std::make_unique<Qwen3VlProjector>(std::move(p).value());
    base = fixtures() + "/vlm/qwen3vl/kv-f32_fa-off/" + GetParam();
    j = vlm_test::read_json(base + ".json");
    Result<Image> img = load_image(fixtures() + "/images/" + j["image"].get<std::string>());
    ASSERT_TRUE(img.is_ok()) << img.status().message();
    image = *img;
  }
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Qwen3VlProjector> proj;
  std::string base;
  nlohmann::json j;
  Image image;
  ThreadPool pool{2};
};

TEST_P(Qwen3VlFixture, PreprocessMatchesLlamaCpp) {
  Result<ImageTensor> t = proj->preprocess(image);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->width, j["preproc_shapes_ne"][0][0].get<int>());
  EXPECT_EQ(t->height, j["preproc_shapes_ne"][0][1].get<int>());
  const std::vector<float> ref = vlm_test::read_f32(base + ".preproc.f32");
  ASSERT_EQ(ref.size(), t->data.size());
  const double d = max_abs_diff(t->data.data(), ref.data(), ref.size());
  std::printf("qwen3vl %s: preproc max abs %.3g\n", GetParam(), d);
  EXPECT_LE(d, 1e-6);
}

TEST_P(Qwen3VlFixture, EmbeddingsWithDeepstackMatchLlamaCpp) {
  ImageTensor t;
  t.width = j["preproc_shapes_ne"][0][0].get<int32_t>();
  t.height = j["preproc_shapes_ne"][0][1].get<int32_t>();
  t.data = vlm_test::read_f32(base + ".preproc.f32");
  std::vector<float> embd;
  ASSERT_TRUE(proj->encode(t, t, embd, pool).is_ok());
  const std::vector<float> ref = vlm_test::read_f32(base + ".image_embd.f32");
  const int64_t n_tok = j["image_embd_shape"][0].get<int64_t>(), width = j["image_embd_shape"][1].get<int64_t>();
  ASSERT_EQ(width, 384);
  ASSERT_EQ(proj->n_embd_out(), width);
  ASSERT_EQ(static_cast<int64_t>(ref.size()), n_tok * width);
  ASSERT_EQ(embd.size(), ref.size());
  // Per part, so a wrong deepstack layer or order shows where it is.
  for (int part = 0; part < 3; ++part) {
    double d = 0;
    for (int64_t r = 0; r < n_tok; ++r) {
      d = std::max(d, max_abs_diff(&embd[r * width + part * 128], &ref[r * width + part * 128], 128));
    }
    std::printf("qwen3vl %s: image_embd part %d max abs %.3g\n", GetParam(), part, d);
    EXPECT_LE(d, 5e-3) << "part " << part;
  }
}

TEST_P(Qwen3VlFixture, VisionModelPiecesAndPositionsMatchTheFixture) {
  Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(*gguf);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  EXPECT_EQ((*vm)->projector_type(), "qwen3vl_merger");
  EXPECT_EQ((*vm)->n_embd_out(), 384);
  Result<MediaEmbedding> e = (*vm)->encode_image(image, pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  ASSERT_EQ(e->pieces.size(), 3u);
  EXPECT_EQ(e->pieces[0].text, "<|vision_start|>");
  EXPECT_EQ(e->pieces[2].text, "<|vision_end|>");
  const EmbeddingRun& run = e->pieces[1].embd;
  const nlohmann::json& chunk = j["chunks"][1];
  ASSERT_EQ(chunk["type"], "image");
  EXPECT_EQ(run.n_tokens, chunk["n_tokens"].get<int64_t>());
  const std::vector<float> ref = vlm_test::read_f32(base + ".image_embd.f32");
  ASSERT_EQ(run.data.size(), ref.size());
  EXPECT_LE(max_abs_diff(run.data.data(), ref.data(), ref.size()), 5e-3);

  const int64_t start = chunk["pos_start"].get<int64_t>();
  const std::vector<int64_t> pos = qwen2vl_visual_positions(start, run.grid_t, run.grid_h, run.grid_w);
  std::vector<int64_t> expect;
  for (const auto& p : chunk["mrope_pos_t_y_x"]) {
    for (const auto& v : p) expect.push_back(v.get<int64_t>());
  }
  EXPECT_EQ(pos, expect);
  EXPECT_EQ(start + qwen2vl_visual_n_pos(run.grid_t, run.grid_h, run.grid_w),
            j["chunks"][2]["pos_start"].get<int64_t>());
}

// Video is refused with a message, never encoded frame by frame as unrelated images.
TEST_P(Qwen3VlFixture, VideoIsRefused) {
  Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(*gguf);
  ASSERT_TRUE(vm.is_ok());
  Result<MediaEmbedding> e = (*vm)->encode_video({image, image}, pool, nullptr);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(e.status().message().find("video"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Runs, Qwen3VlFixture, testing::Values("vlm_p1", "vlm_p1_wide"));

// Align corners: the four corner cells are copied, and a 2x2 grid resized to 3x3 puts the
// mean of its four cells in the middle; downscaling 3 -> 2 keeps the corners.
TEST(Qwen3VlPositionGrid, BilinearAlignCorners) {
  const std::vector<float> g = {0, 10, 20, 30};  // [2, 2, 1]
  const std::vector<float> up = resize_grid_bilinear_align_corners(g, 2, 2, 1, 3, 3);
  ASSERT_EQ(up.size(), 9u);
  EXPECT_FLOAT_EQ(up[0], 0);
  EXPECT_FLOAT_EQ(up[2], 10);
  EXPECT_FLOAT_EQ(up[6], 20);
  EXPECT_FLOAT_EQ(up[8], 30);
  EXPECT_FLOAT_EQ(up[4], 15);
  EXPECT_FLOAT_EQ(up[1], 5);
  const std::vector<float> g3 = {0, 1, 2, 3, 4, 5, 6, 7, 8};  // [3, 3, 1]
  const std::vector<float> down = resize_grid_bilinear_align_corners(g3, 3, 3, 1, 2, 3);
  ASSERT_EQ(down.size(), 6u);
  EXPECT_FLOAT_EQ(down[0], 0);
  EXPECT_FLOAT_EQ(down[1], 1);
  EXPECT_FLOAT_EQ(down[2], 2);
  EXPECT_FLOAT_EQ(down[3], 6);
  EXPECT_FLOAT_EQ(down[5], 8);
}

}  // namespace
}  // namespace vlkv
