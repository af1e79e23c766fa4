// Qwen2-VL video on the tiny random-weight mmproj (tests/data/fixtures/models/
// mmproj-tiny-qwen2vl.gguf: patch 8, merge 2, so align 16). Frames pair into temporal
// patches of 2 (an odd last frame duplicated): N frames -> grid_t = ceil(N/2) groups of
// grid_h * grid_w merged tokens, M-RoPE temporal index 0..grid_t-1. Expectations are
// hand-computed from the Qwen2-VL reference (HF Qwen2VLImageProcessor, get_rope_index);
// no llama.cpp output is compared (its mtmd frame merge is recent and not in the fixtures).
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

// A 64 x 48 frame (resized to 64 x 48: grid 3 x 4 merged tokens) whose content depends on seed.
Image frame(int seed) {
  Image img;
  img.width = 64;
  img.height = 48;
  img.pixels.resize(static_cast<size_t>(img.width) * img.height * 3);
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      uint8_t* p = &img.pixels[(static_cast<size_t>(y) * img.width + x) * 3];
      p[0] = static_cast<uint8_t>((x * 4 + seed * 37) & 255);
      p[1] = static_cast<uint8_t>((y * 5 + seed * 91) & 255);
      p[2] = static_cast<uint8_t>((x * y + seed * 13) & 255);
    }
  }
  return img;
}

struct Qwen2VlVideo : testing::Test {
  void SetUp() override {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(vlm_test::fixtures() + "/models/mmproj-tiny-qwen2vl.gguf");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    gguf = std::move(g).value();
    Result<std::unique_ptr<VisionModel>> m = VisionModel::load(*gguf);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    model = std::move(m).value();
    ASSERT_EQ(model->projector_type(), "qwen2vl_merger");
  }
  const EmbeddingRun& run_of(const MediaEmbedding& e) {
    static const EmbeddingRun kEmpty;
    EXPECT_EQ(e.pieces.size(), 3u);
    if (e.pieces.size() != 3) return kEmpty;
    EXPECT_EQ(e.pieces[0].text, "<|vision_start|>");
    EXPECT_EQ(e.pieces[2].text, "<|vision_end|>");
    return e.pieces[1].embd;
  }
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<VisionModel> model;
  ThreadPool pool{2};
};

std::vector<float> rows(const EmbeddingRun& r, int64_t first, int64_t n, int64_t n_embd) {
  if (static_cast<int64_t>(r.data.size()) < (first + n) * n_embd) return {};
  return std::vector<float>(r.data.begin() + first * n_embd, r.data.begin() + (first + n) * n_embd);
}

TEST_F(Qwen2VlVideo, ThreeFramesMakeTwoTemporalPatches) {
  std::vector<int64_t> progress;
  Result<MediaEmbedding> e = model->encode_video({frame(1), frame(2), frame(3)}, pool,
                                                 [&](int64_t done, int64_t total) {
                                                   EXPECT_EQ(total, 3);
                                                   progress.push_back(done);
                                                 });
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const EmbeddingRun& r = run_of(*e);
  EXPECT_EQ(r.grid_t, 2);
  EXPECT_EQ(r.grid_h, 3);
  EXPECT_EQ(r.grid_w, 4);
  EXPECT_EQ(r.n_tokens, 2 * 3 * 4);
  EXPECT_EQ(e->n_visual_tokens(), 24);
  const int64_t d = model->n_embd_out();
  ASSERT_EQ(r.data.size(), static_cast<size_t>(24 * d));
  EXPECT_EQ(progress, (std::vector<int64_t>{2, 3}));

  // The odd last frame is duplicated: the second group is frame 3 as a still image.
  Result<MediaEmbedding> still3 = model->encode_image(frame(3), pool);
  ASSERT_TRUE(still3.is_ok());
  EXPECT_EQ(rows(r, 12, 12, d), run_of(*still3).data);
  // The first group pairs frames 1 and 2: neither still image.
  Result<MediaEmbedding> still1 = model->encode_image(frame(1), pool);
  ASSERT_TRUE(still1.is_ok());
  EXPECT_NE(rows(r, 0, 12, d), run_of(*still1).data);

  // M-RoPE from text position 7: token (t, y, x) at index t*12 + y*4 + x gets (7+t, 7+y, 7+x);
  // the text after it continues at 7 + max(2, 3, 4) = 11.
  const std::vector<int64_t> pos = qwen2vl_visual_positions(7, r.grid_t, r.grid_h, r.grid_w);
  ASSERT_EQ(pos.size(), 24u * 3);
  const int64_t expect[][4] = {  // index, t, h, w
      {0, 7, 7, 7},   {3, 7, 7, 10},  {4, 7, 8, 7},   {11, 7, 9, 10},
      {12, 8, 7, 7},  {17, 8, 8, 8},  {23, 8, 9, 10}};
  for (const auto& x : expect) {
    EXPECT_EQ(pos[x[0] * 3 + 0], x[1]) << "token " << x[0];
    EXPECT_EQ(pos[x[0] * 3 + 1], x[2]) << "token " << x[0];
    EXPECT_EQ(pos[x[0] * 3 + 2], x[3]) << "token " << x[0];
  }
  EXPECT_EQ(qwen2vl_visual_n_pos(r.grid_t, r.grid_h, r.grid_w), 4);
}

TEST_F(Qwen2VlVideo, FourFramesMakeTwoTemporalPatches) {
  Result<MediaEmbedding> e = model->encode_video({frame(1), frame(2), frame(3), frame(4)}, pool, nullptr);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const EmbeddingRun& r = run_of(*e);
  EXPECT_EQ(r.grid_t, 2);
  EXPECT_EQ(r.n_tokens, 24);
  const int64_t d = model->n_embd_out();
  // The first group equals the 3-frame clip's (same pair), the second differs (3+4, not 3+3).
  Result<MediaEmbedding> e3 = model->encode_video({frame(1), frame(2), frame(3)}, pool, nullptr);
  ASSERT_TRUE(e3.is_ok());
  EXPECT_EQ(rows(r, 0, 12, d), rows(run_of(*e3), 0, 12, d));
  EXPECT_NE(rows(r, 12, 12, d), rows(run_of(*e3), 12, 12, d));
  // Frame order matters: the two temporal kernels differ.
  Result<MediaEmbedding> swapped = model->encode_video({frame(2), frame(1), frame(3), frame(4)}, pool, nullptr);
  ASSERT_TRUE(swapped.is_ok());
  EXPECT_NE(rows(r, 0, 12, d), rows(run_of(*swapped), 0, 12, d));

  const std::vector<int64_t> pos = qwen2vl_visual_positions(0, r.grid_t, r.grid_h, r.grid_w);
  ASSERT_EQ(pos.size(), 24u * 3);
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_EQ(pos[i * 3 + 0], i / 12);
    EXPECT_EQ(pos[i * 3 + 1], (i % 12) / 4);
    EXPECT_EQ(pos[i * 3 + 2], i % 4);
  }
  EXPECT_EQ(qwen2vl_visual_n_pos(r.grid_t, r.grid_h, r.grid_w), 4);
}

TEST_F(Qwen2VlVideo, TwoIdenticalFramesEqualTheStillImage) {
  const Image img = vlm_test::test_image();
  ASSERT_TRUE(img.valid());
  Result<MediaEmbedding> video = model->encode_video({img, img}, pool, nullptr);
  Result<MediaEmbedding> still = model->encode_image(img, pool);
  ASSERT_TRUE(video.is_ok() && still.is_ok());
  const EmbeddingRun& v = run_of(*video);
  const EmbeddingRun& s = run_of(*still);
  EXPECT_EQ(v.grid_t, 1);
  EXPECT_EQ(v.grid_h, s.grid_h);
  EXPECT_EQ(v.grid_w, s.grid_w);
  EXPECT_EQ(v.n_tokens, s.n_tokens);
  EXPECT_EQ(v.data, s.data);  // bit-identical
  // One frame alone is the same temporal patch (duplicated).
  Result<MediaEmbedding> one = model->encode_video({img}, pool, nullptr);
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(run_of(*one).data, s.data);
}

TEST_F(Qwen2VlVideo, FramesTakeTheFirstFramesSize) {
  Image big = frame(5);
  Image other;  // a different size: resized to the first frame's grid
  other.width = 40;
  other.height = 40;
  other.pixels.assign(40 * 40 * 3, 90);
  Result<MediaEmbedding> e = model->encode_video({big, other, big}, pool, nullptr);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_EQ(run_of(*e).grid_h, 3);
  EXPECT_EQ(run_of(*e).grid_w, 4);
  EXPECT_FALSE(model->encode_video({}, pool, nullptr).is_ok());
}

}  // namespace
}  // namespace vlkv
