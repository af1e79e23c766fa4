// Gemma 3 projector against llama.cpp (tests/data/fixtures/vlm/gemma3, README-batch2):
// preprocessing (aspect-preserving bilinear resize onto a black 64x64 canvas) vs
// preproc.f32, the SigLIP ViT + 2x2 average pool + soft-emb RMSNorm + transposed input
// projection vs image_embd.f32 (from the fixture's own ViT input, and end to end), and the
// <start_of_image> [16] <end_of_image> layout.
//
// Tolerances (README-batch2 "How to compare"): preproc 1e-6 (same resize arithmetic, f32
// normalisation); image_embd 5e-3 max abs: we round the GELU through ggml's f16 table but
// not the patch conv's f16 im2col, which moves values by ~1e-3 (the README's float64 check
// without that rounding: 1.1e-3); a wrong pool order or missing norm is off by O(1).
#include <gtest/gtest.h>

#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "vision/gemma3_model.h"
#include "vision/vision_model.h"
#include "vlkv/media.h"
#include "vlm_fixture_util.h"

namespace vlkv {
namespace {

using vlm_test::fixtures;
using vlm_test::max_abs_diff;

struct Gemma3Fixture : testing::Test {
  void SetUp() override {
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(fixtures() + "/models/mmproj-tiny-gemma3.gguf");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    gguf = std::move(g).value();
    Result<Gemma3Projector> p = Gemma3Projector::load(*gguf);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    proj = std::make_unique<Gemma3Projector>(std::move(p).value());
  }
  static std::string run_base(const std::string& run) { return fixtures() + "/vlm/gemma3/kv-f32_fa-off/" + run; }
  static Image image_of(const std::string& run) {
    const nlohmann::json j = vlm_test::read_json(run_base(run) + ".json");
    Result<Image> img = load_image(fixtures() + "/images/" + j["image"].get<std::string>());
    EXPECT_TRUE(img.is_ok());
    return img.is_ok() ? *img : Image{};
  }
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Gemma3Projector> proj;
  ThreadPool pool{2};
};

TEST_F(Gemma3Fixture, HparamsAsLlamaCpp) {
  EXPECT_EQ(proj->pool_size(), 2);  // clip.vision.projector.scale_factor
  EXPECT_EQ(proj->n_tokens(), 16);
  EXPECT_EQ(proj->n_embd_out(), 128);
}

TEST_F(Gemma3Fixture, PreprocessMatchesLlamaCpp) {
  for (const char* run : {"vlm_p1", "vlm_p1_wide"}) {
    SCOPED_TRACE(run);
    Result<ImageTensor> t = proj->preprocess(image_of(run));
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    const std::vector<float> ref = vlm_test::read_f32(run_base(run) + ".preproc.f32");
    ASSERT_EQ(t->data.size(), ref.size());
    const double d = max_abs_diff(t->data.data(), ref.data(), ref.size());
    std::printf("[ gemma3 %s ] preproc max abs %.3g\n", run, d);
    EXPECT_LE(d, 1e-6);
  }
}

TEST_F(Gemma3Fixture, ImageEmbeddingsMatchLlamaCpp) {
  for (const char* run : {"vlm_p1", "vlm_p1_wide"}) {
    SCOPED_TRACE(run);
    const std::vector<float> ref = vlm_test::read_f32(run_base(run) + ".image_embd.f32");
    ASSERT_EQ(ref.size(), 16u * 128);
    // From llama.cpp's own ViT input: the encoder and projector alone.
    ImageTensor in{64, 64, vlm_test::read_f32(run_base(run) + ".preproc.f32")};
    std::vector<float> embd;
    ASSERT_TRUE(proj->encode(in, embd, pool).is_ok());
    ASSERT_EQ(embd.size(), ref.size());
    const double own = max_abs_diff(embd.data(), ref.data(), ref.size());
    // End to end through the VisionModel interface.
    auto vm = VisionModel::load(*gguf);
    ASSERT_TRUE(vm.is_ok()) << vm.status().message();
    Result<MediaEmbedding> me = (*vm)->encode_image(image_of(run), pool);
    ASSERT_TRUE(me.is_ok()) << me.status().message();
    ASSERT_EQ(me->pieces.size(), 3u);
    EXPECT_EQ(me->pieces[0].kind, MediaPiece::Kind::kText);
    EXPECT_EQ(me->pieces[0].text, "<start_of_image>");
    EXPECT_EQ(me->pieces[2].text, "<end_of_image>");
    ASSERT_EQ(me->pieces[1].embd.n_tokens, 16);
    const double e2e = max_abs_diff(me->pieces[1].embd.data.data(), ref.data(), ref.size());
    std::printf("[ gemma3 %s ] image_embd max abs %.3g (from preproc.f32), %.3g (end to end)\n", run, own, e2e);
    EXPECT_LE(own, 5e-3);
    EXPECT_LE(e2e, 5e-3);
  }
}

}  // namespace
}  // namespace vlkv
