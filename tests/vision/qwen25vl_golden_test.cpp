// Qwen2.5-VL merger projector against llama.cpp (tests/data/fixtures/vlm/qwen25vl, second
// batch): the preprocessed image and the image embeddings of both runs. vlm_p1 is the
// 64x64 image upscaled to 84x84 (3x3 merged tokens, one 112-px window); vlm_p1_wide is
// 128x48 fitted into 140x56 (5x2 merged tokens) with black bands above and below, and
// spans two windows (4 + 1 merged columns).
//
// Tolerances (README-batch2 "How to compare"): preproc 1e-6 (same bilinear arithmetic as
// libmtmd; a stretched resize differs by ~1.0 on the padded rows); image_embd 5e-3 max abs:
// llama.cpp rounds the patch conv's im2col and the merger GELU to f16 (item 1), which we
// do not reproduce, so f32 math lands up to ~3e-3 away; wrong windows, ordering or
// preprocessing give 0.5 and more.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/qwen2vl_model.h"
#include "vision/qwen2vl_positions.h"
#include "vision/vision_model.h"
#include "vlm_fixture_util.h"

namespace vlkv {
namespace {

using vlm_test::fixtures;
using vlm_test::max_abs_diff;

constexpr double kPreprocTol = 1e-6;
constexpr double kEmbdTol = 5e-3;

std::string run_base(const std::string& run) { return fixtures() + "/vlm/qwen25vl/kv-f32_fa-off/" + run; }

Image load_png(const std::string& name) {
  const std::string path = fixtures() + "/images/" + name;
  int w = 0, h = 0, c = 0;
  unsigned char* px = stbi_load(path.c_str(), &w, &h, &c, 3);
  Image img;
  if (!px) return img;
  img.width = w;
  img.height = h;
  img.pixels.assign(px, px + static_cast<size_t>(w) * h * 3);
  stbi_image_free(px);
  return img;
}

struct Qwen25VlFixture : testing::TestWithParam<std::string> {
  void SetUp() override {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(fixtures() + "/models/mmproj-tiny-qwen25vl.gguf");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    gguf = std::move(g).value();
    Result<Qwen2VlProjector> p = Qwen2VlProjector::load(*gguf);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    proj = std::make_unique<Qwen2VlProjector>(std::move(p).value());
    j = vlm_test::read_json(run_base(GetParam()) + ".json");
    image = load_png(j["image"].get<std::string>());
    ASSERT_TRUE(image.valid());
    width = j["preproc_shapes_ne"][0][0].get<int32_t>();
    height = j["preproc_shapes_ne"][0][1].get<int32_t>();
  }
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Qwen2VlProjector> proj;
  nlohmann::json j;
  Image image;
  int32_t width = 0, height = 0;
  ThreadPool pool{2};
};

TEST_P(Qwen25VlFixture, PreprocessMatchesLlamaCpp) {
  EXPECT_TRUE(proj->is_qwen25());
  EXPECT_EQ(proj->window_merged(), 4);  // 112 px / (14 * 2)
  Result<ImageTensor> t = proj->preprocess(image);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->width, width);
  EXPECT_EQ(t->height, height);
  const std::vector<float> ref = vlm_test::read_f32(run_base(GetParam()) + ".preproc.f32");
  ASSERT_EQ(ref.size(), t->data.size());
  const double d = max_abs_diff(t->data.data(), ref.data(), ref.size());
  std::printf("qwen25vl %s: preproc max abs %.3g\n", GetParam().c_str(), d);
  EXPECT_LE(d, kPreprocTol);
}

// The ViT + merger alone, on llama.cpp's own input tensor.
TEST_P(Qwen25VlFixture, EmbeddingsFromLlamaCppInputMatch) {
  ImageTensor t;
  t.width = width;
  t.height = height;
  t.data = vlm_test::read_f32(run_base(GetParam()) + ".preproc.f32");
  std::vector<float> embd;
  ASSERT_TRUE(proj->encode(t, t, embd, pool).is_ok());
  const std::vector<float> ref = vlm_test::read_f32(run_base(GetParam()) + ".image_embd.f32");
  ASSERT_EQ(embd.size(), ref.size());
  const double d = max_abs_diff(embd.data(), ref.data(), ref.size());
  std::printf("qwen25vl %s: image_embd (llama.cpp input) max abs %.3g\n", GetParam().c_str(), d);
  EXPECT_LE(d, kEmbdTol);
}

// The whole vision path from the PNG, and the chunk's M-RoPE positions.
TEST_P(Qwen25VlFixture, VisionModelMatchesLlamaCpp) {
  Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(*gguf);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  EXPECT_EQ((*vm)->projector_type(), "qwen2.5vl_merger");
  Result<MediaEmbedding> e = (*vm)->encode_image(image, pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  ASSERT_EQ(e->pieces.size(), 3u);
  EXPECT_EQ(e->pieces[0].text, "<|vision_start|>");
  EXPECT_EQ(e->pieces[2].text, "<|vision_end|>");
  const EmbeddingRun& run = e->pieces[1].embd;
  EXPECT_EQ(run.n_tokens, j["n_image_tokens"].get<int64_t>());
  EXPECT_EQ(run.grid_w, width / 28);
  EXPECT_EQ(run.grid_h, height / 28);
  const std::vector<float> ref = vlm_test::read_f32(run_base(GetParam()) + ".image_embd.f32");
  ASSERT_EQ(run.data.size(), ref.size());
  const double d = max_abs_diff(run.data.data(), ref.data(), ref.size());
  std::printf("qwen25vl %s: image_embd (from the PNG) max abs %.3g\n", GetParam().c_str(), d);
  EXPECT_LE(d, kEmbdTol);

  const nlohmann::json& chunk = j["chunks"][1];
  ASSERT_EQ(chunk["type"], "image");
  const int64_t start = chunk["pos_start"].get<int64_t>();
  std::vector<int64_t> expect;
  for (const auto& p : chunk["mrope_pos_t_y_x"])
    for (const auto& v : p) expect.push_back(v.get<int64_t>());
  EXPECT_EQ(qwen2vl_visual_positions(start, run.grid_t, run.grid_h, run.grid_w), expect);
  EXPECT_EQ(qwen2vl_visual_n_pos(run.grid_t, run.grid_h, run.grid_w), chunk["n_pos"].get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(Runs, Qwen25VlFixture, testing::Values("vlm_p1", "vlm_p1_wide"));

}  // namespace
}  // namespace vlkv
