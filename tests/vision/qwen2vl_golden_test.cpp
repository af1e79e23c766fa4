// Qwen2-VL merger projector against llama.cpp (tests/data/fixtures/vlm/qwen2vl):
// preprocessed image, image embeddings, and the M-RoPE positions of the chunk.
#include <gtest/gtest.h>

#include <memory>

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

const std::string kRun = "/vlm/qwen2vl/kv-f32_fa-off/vlm_q1";

struct Qwen2VlFixture : testing::Test {
  void SetUp() override {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(fixtures() + "/models/mmproj-tiny-qwen2vl.gguf");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    gguf = std::move(g).value();
    Result<Qwen2VlProjector> p = Qwen2VlProjector::load(*gguf);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    proj = std::make_unique<Qwen2VlProjector>(std::move(p).value());
    image = vlm_test::test_image();
    ASSERT_TRUE(image.valid());
  }
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Qwen2VlProjector> proj;
  Image image;
  ThreadPool pool{2};
};

TEST_F(Qwen2VlFixture, PreprocessMatchesLlamaCpp) {
  Result<ImageTensor> t = proj->preprocess(image);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->width, 64);
  EXPECT_EQ(t->height, 64);
  const std::vector<float> ref = vlm_test::read_f32(fixtures() + kRun + ".preproc.f32");
  ASSERT_EQ(ref.size(), t->data.size());
  const double d = max_abs_diff(t->data.data(), ref.data(), ref.size());
  std::printf("qwen2vl: preproc max abs %.3g\n", d);
  EXPECT_LE(d, 1e-6);
}

TEST_F(Qwen2VlFixture, EmbeddingsMatchLlamaCpp) {
  ImageTensor t;
  t.width = t.height = 64;
  t.data = vlm_test::read_f32(fixtures() + kRun + ".preproc.f32");
  std::vector<float> embd;
  ASSERT_TRUE(proj->encode(t, t, embd, pool).is_ok());
  const std::vector<float> ref = vlm_test::read_f32(fixtures() + kRun + ".image_embd.f32");
  ASSERT_EQ(ref.size(), 16u * 128);
  ASSERT_EQ(embd.size(), ref.size());
  const double d = max_abs_diff(embd.data(), ref.data(), ref.size());
  std::printf("qwen2vl: image_embd max abs %.3g\n", d);
  EXPECT_LE(d, 1e-4);
}

TEST_F(Qwen2VlFixture, VisionModelPiecesAndPositionsMatchTheFixture) {
  Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(*gguf);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  EXPECT_EQ((*vm)->projector_type(), "qwen2vl_merger");
  EXPECT_EQ((*vm)->n_embd_out(), 128);
  Result<MediaEmbedding> e = (*vm)->encode_image(image, pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  ASSERT_EQ(e->pieces.size(), 3u);
  EXPECT_EQ(e->pieces[0].text, "<|vision_start|>");
  EXPECT_EQ(e->pieces[2].text, "<|vision_end|>");
  const EmbeddingRun& run = e->pieces[1].embd;
  EXPECT_EQ(run.n_tokens, 16);
  EXPECT_EQ(run.grid_t, 1);
  EXPECT_EQ(run.grid_h, 4);
  EXPECT_EQ(run.grid_w, 4);
  const std::vector<float> ref = vlm_test::read_f32(fixtures() + kRun + ".image_embd.f32");
  ASSERT_EQ(run.data.size(), ref.size());
  EXPECT_LE(max_abs_diff(run.data.data(), ref.data(), ref.size()), 1e-4);

  // The image chunk's (t, y, x) positions and where the text after it starts.
  const nlohmann::json j = vlm_test::read_json(fixtures() + kRun + ".json");
  const nlohmann::json& chunk = j["chunks"][1];
  ASSERT_EQ(chunk["type"], "image");
  const int64_t start = chunk["pos_start"].get<int64_t>();
  const std::vector<int64_t> pos = qwen2vl_visual_positions(start, run.grid_t, run.grid_h, run.grid_w);
  std::vector<int64_t> expect;
  for (const auto& p : chunk["mrope_pos_t_y_x"]) {
    for (const auto& v : p) expect.push_back(v.get<int64_t>());
  }
  EXPECT_EQ(pos, expect);
  EXPECT_EQ(qwen2vl_visual_n_pos(run.grid_t, run.grid_h, run.grid_w), chunk["n_pos"].get<int64_t>());
  EXPECT_EQ(start + qwen2vl_visual_n_pos(run.grid_t, run.grid_h, run.grid_w),
            j["chunks"][2]["pos_start"].get<int64_t>());
}

TEST(Qwen2VlSize, SmartResizeRoundsToTheMergeGrid) {
  const int64_t a = 16;
  EXPECT_EQ(qwen2vl_target_size(64, 64, a, 8 * a * a, 4096 * a * a).width, 64);
  const Qwen2VlSize s = qwen2vl_target_size(100, 37, a, 8 * a * a, 4096 * a * a);
  EXPECT_EQ(s.width % a, 0);
  EXPECT_EQ(s.height % a, 0);
  EXPECT_EQ(s.width, 96);   // round(100/16)*16
  EXPECT_EQ(s.height, 32);  // round(37/16)*16
  const Qwen2VlSize small = qwen2vl_target_size(8, 8, a, 8 * a * a, 4096 * a * a);  // upscaled to >= 8 tokens
  EXPECT_GE(static_cast<int64_t>(small.width) * small.height, 8 * a * a);
  const Qwen2VlSize big = qwen2vl_target_size(8000, 6000, a, 8 * a * a, 4096 * a * a);
  EXPECT_LE(static_cast<int64_t>(big.width) * big.height, 4096 * a * a);
}

}  // namespace
}  // namespace vlkv
