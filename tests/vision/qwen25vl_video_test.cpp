// Qwen2.5-VL video: temporal M-RoPE positions that follow time, as HF transformers'
// Qwen2_5_VLModel.get_rope_index computes them (temporal patch ti at
// floor(ti * second_per_grid_t * tokens_per_second), second_per_grid_t = 2 / fps,
// tokens_per_second 2), on the tiny Qwen2.5-VL mmproj of the fixtures (patch 14, merge 2).
// Expectations are hand-computed from that formula; llama.cpp has no temporal index (each
// frame pair is its own image chunk), so there is no llama.cpp output to compare.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/qwen2vl_positions.h"
#include "vision/vision_model.h"
#include "vlm_fixture_util.h"

namespace vlkv {
namespace {

TEST(Qwen2VlPositions, TemporalIndexFollowsTheStep) {
  // t_step 1 (images, Qwen2-VL): 0, 1, 2, ...
  EXPECT_EQ(qwen2vl_temporal_index(3, 1.0), 3);
  // 4 fps: second_per_grid_t 0.5 s, x2 tokens/s = 1 per temporal patch.
  EXPECT_EQ(qwen2vl_temporal_index(3, 0.5 * 2), 3);
  // 1 fps: 2 s per temporal patch = 4 positions.
  EXPECT_EQ(qwen2vl_temporal_index(3, 4.0), 12);
  // 3 fps: 2/3 s x 2 = 4/3 per patch, truncated after the product: 0, 1, 2, 4.
  const double s3 = 2.0 / 3.0 * 2.0;
  EXPECT_EQ((std::vector<int64_t>{qwen2vl_temporal_index(0, s3), qwen2vl_temporal_index(1, s3),
                                  qwen2vl_temporal_index(2, s3), qwen2vl_temporal_index(3, s3)}),
            (std::vector<int64_t>{0, 1, 2, 4}));
  // 8 fps: 0.25 s x 2 = 0.5: patches 0 and 1 share position 0 (HF truncates the same way).
  EXPECT_EQ(qwen2vl_temporal_index(1, 0.5), 0);
  EXPECT_EQ(qwen2vl_temporal_index(2, 0.5), 1);
}

TEST(Qwen2VlPositions, VideoRunPositionsAndAdvance) {
  // 3 temporal patches of 2 x 3 merged tokens from text position 10, step 2 (2 fps).
  const std::vector<int64_t> pos = qwen2vl_visual_positions(10, 3, 2, 3, 2.0);
  ASSERT_EQ(pos.size(), 3u * 6 * 3);
  const int64_t expect[][4] = {  // token, t, h, w
      {0, 10, 10, 10}, {5, 10, 11, 12}, {6, 12, 10, 10}, {11, 12, 11, 12}, {12, 14, 10, 10}, {17, 14, 11, 12}};
  for (const auto& x : expect) {
    EXPECT_EQ(pos[x[0] * 3 + 0], x[1]) << "token " << x[0];
    EXPECT_EQ(pos[x[0] * 3 + 1], x[2]) << "token " << x[0];
    EXPECT_EQ(pos[x[0] * 3 + 2], x[3]) << "token " << x[0];
  }
  // HF: the text after it starts at max position + 1 = 10 + max(4, 1, 2) + 1.
  EXPECT_EQ(qwen2vl_visual_n_pos(3, 2, 3, 2.0), 5);
  EXPECT_EQ(qwen2vl_visual_n_pos(3, 2, 3, 1.0), 3);   // Qwen2-VL: max(grid_t, h, w)
  EXPECT_EQ(qwen2vl_visual_n_pos(1, 2, 3, 4.0), 3);   // one temporal patch: the step never applies
  EXPECT_EQ(qwen2vl_visual_n_pos(2, 8, 6, 2.0), 8);   // a tall grid still dominates
  // The defaults are the image layout.
  EXPECT_EQ(qwen2vl_visual_positions(4, 2, 2, 2), qwen2vl_visual_positions(4, 2, 2, 2, 1.0));
}

struct Qwen25VlVideo : testing::Test {
  void SetUp() override {
    for (const char* name : {"mmproj-tiny-qwen25vl.gguf", "mmproj-tiny-qwen2vl.gguf"}) {
      Result<std::unique_ptr<GgufFile>> g = GgufFile::open(vlm_test::fixtures() + "/models/" + name);
      ASSERT_TRUE(g.is_ok()) << g.status().message();
      Result<std::unique_ptr<VisionModel>> m = VisionModel::load(**g);
      ASSERT_TRUE(m.is_ok()) << m.status().message();
      ggufs.push_back(std::move(g).value());
      models.push_back(std::move(m).value());
    }
    ASSERT_EQ(models[0]->projector_type(), "qwen2.5vl_merger");
    ASSERT_EQ(models[1]->projector_type(), "qwen2vl_merger");
  }
  std::vector<std::unique_ptr<GgufFile>> ggufs;
  std::vector<std::unique_ptr<VisionModel>> models;  // qwen2.5vl, qwen2vl
  ThreadPool pool{2};
};

TEST_F(Qwen25VlVideo, TemporalStepComesFromTheFrameRate) {
  const VisionModel& q25 = *models[0];
  EXPECT_DOUBLE_EQ(q25.video_t_step(2.0), 2.0);  // HF's default fps: 1 s per patch, 2 tokens/s
  EXPECT_DOUBLE_EQ(q25.video_t_step(4.0), 1.0);
  EXPECT_DOUBLE_EQ(q25.video_t_step(1.0), 4.0);
  EXPECT_DOUBLE_EQ(q25.video_t_step(0.0), 2.0);  // unknown rate: get_rope_index's second_per_grid_t = 1
  EXPECT_DOUBLE_EQ(models[1]->video_t_step(1.0), 1.0);  // Qwen2-VL: one position per temporal patch
}

TEST_F(Qwen25VlVideo, FivePairsMakeOneRun) {
  std::vector<Image> frames;
  for (int i = 0; i < 5; ++i) {
    Image f;
    f.width = 56;
    f.height = 56;
    f.pixels.assign(56 * 56 * 3, static_cast<uint8_t>(40 * i));
    frames.push_back(f);
  }
  Result<MediaEmbedding> e = models[0]->encode_video(frames, pool, nullptr);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  ASSERT_EQ(e->pieces.size(), 3u);
  const EmbeddingRun& r = e->pieces[1].embd;
  EXPECT_EQ(r.grid_t, 3);  // 5 frames: pairs (0,1), (2,3), (4,4)
  EXPECT_EQ(r.grid_h, 3);  // 56x56 is 4 merged tokens, below the minimum of 8: upscaled to 84x84
  EXPECT_EQ(r.grid_w, 3);
  EXPECT_EQ(r.n_tokens, 3 * r.grid_h * r.grid_w);
  EXPECT_DOUBLE_EQ(r.t_step, 1.0);  // the run itself does not know the rate; the engine sets it per chunk
}

}  // namespace
}  // namespace vlkv
