// write_random_mmproj: each preset's file has llama.cpp's keys, tensor names, shapes and
// types (matrices F16; norms, biases, position embeddings F32) and vlkv's own vision loader
// encodes an image with it. Written with one layer of the real width (the full towers are
// 0.6-1.3 GB and take a minute to write); the per-layer shapes are the real ones.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "random_mmproj.h"
#include "vision/vision_model.h"

namespace vlkv {
namespace {

// Per process: two checkouts' test runs on one machine must not write each other's files.
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(getpid()) + "_" + name)).string();
}

MmprojPreset one_layer(const std::string& name) {
  const MmprojPreset* p = find_mmproj_preset(name);
  EXPECT_NE(p, nullptr) << name;
  MmprojPreset q = p ? *p : MmprojPreset{};
  q.n_layers = 1;
  return q;
}

Image gradient(int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>((i * 7) % 251);
  return img;
}

void expect_tensor(const GgufFile& g, const std::string& name, GgmlType type, std::vector<int64_t> dims) {
  const GgufTensorInfo* t = g.find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->type, type) << name;
  EXPECT_EQ(t->dims, dims) << name;
}

TEST(RandomMmproj, ClipL336HasLlavaGeometryAndEncodes576Tokens) {
  const std::string path = temp_path("vlkv_mmproj_clip_l.gguf");
  ASSERT_TRUE(write_random_mmproj(one_layer("clip-l-336"), 64, 3, path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.get_string("clip.projector_type").value(), "mlp");
  EXPECT_EQ(g.get_u64("clip.vision.image_size").value(), 336u);
  EXPECT_EQ(g.get_u64("clip.vision.embedding_length").value(), 1024u);
  EXPECT_EQ(g.get_u64("general.file_type").value(), 1u);
  expect_tensor(g, "v.patch_embd.weight", GgmlType::kF16, {14, 14, 3, 1024});
  expect_tensor(g, "v.position_embd.weight", GgmlType::kF32, {1024, 577});
  expect_tensor(g, "v.blk.0.attn_q.weight", GgmlType::kF16, {1024, 1024});
  expect_tensor(g, "v.blk.0.attn_q.bias", GgmlType::kF32, {1024});
  expect_tensor(g, "v.blk.0.ffn_up.weight", GgmlType::kF16, {1024, 4096});
  expect_tensor(g, "mm.0.weight", GgmlType::kF16, {1024, 64});
  expect_tensor(g, "mm.2.weight", GgmlType::kF16, {64, 64});
  EXPECT_EQ(g.find_tensor("v.blk.1.ln1.weight"), nullptr);

  auto vm = VisionModel::load(g);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  ThreadPool pool(2);
  auto e = (*vm)->encode_image(gradient(400, 300), pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_EQ(e->n_visual_tokens(), 576);  // 24 x 24 patches
  std::filesystem::remove(path);
}

TEST(RandomMmproj, Qwen25Vl3bHasWindowsAndMergerAndEncodes) {
  const std::string path = temp_path("vlkv_mmproj_qwen25vl.gguf");
  EXPECT_EQ(find_mmproj_preset("qwen2.5vl-3b")->n_wa_pattern, 8);  // full attention at layers 7, 15, 23, 31
  MmprojPreset p = one_layer("qwen2.5vl-3b");
  p.n_wa_pattern = 1;  // one layer: vlkv's loader wants the pattern within the layer count
  ASSERT_TRUE(write_random_mmproj(p, 64, 3, path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.get_string("clip.projector_type").value(), "qwen2.5vl_merger");
  EXPECT_EQ(g.get_u64("clip.vision.n_wa_pattern").value(), 1u);
  EXPECT_TRUE(g.get_bool("clip.use_silu").value());
  expect_tensor(g, "v.patch_embd.weight.1", GgmlType::kF16, {14, 14, 3, 1280});
  expect_tensor(g, "v.blk.0.ffn_gate.weight", GgmlType::kF16, {1280, 3420});
  expect_tensor(g, "v.blk.0.ffn_gate.bias", GgmlType::kF32, {3420});
  EXPECT_EQ(g.find_tensor("v.blk.0.ln1.bias"), nullptr);  // RMSNorm
  expect_tensor(g, "mm.0.weight", GgmlType::kF16, {5120, 5120});
  expect_tensor(g, "mm.2.weight", GgmlType::kF16, {5120, 64});

  auto vm = VisionModel::load(g);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  ThreadPool pool(2);
  auto e = (*vm)->encode_image(gradient(112, 56), pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_EQ(e->n_visual_tokens(), 8);  // 112x56 -> 8x4 patches -> 4x2 merged (at least 8 tokens)
  std::filesystem::remove(path);
}

TEST(RandomMmproj, SiglipPresetsHaveTheirProjectorsTensors) {
  const std::string path = temp_path("vlkv_mmproj_siglip.gguf");
  ASSERT_TRUE(write_random_mmproj(one_layer("siglip-so400m"), 64, 3, path).is_ok());
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    expect_tensor(**f, "v.position_embd.weight", GgmlType::kF32, {1152, 4096});  // 64 x 64 patches
    expect_tensor(**f, "mm.soft_emb_norm.weight", GgmlType::kF32, {1152});
    expect_tensor(**f, "mm.input_projection.weight", GgmlType::kF16, {64, 1152});
    EXPECT_FALSE((*f)->get_u64("clip.vision.projector.scale_factor").is_ok());  // Gemma 3 files rely on the default 4
  }
  ASSERT_TRUE(write_random_mmproj(one_layer("siglip-so400m-idefics3"), 64, 3, path).is_ok());
  {
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ((*f)->get_u64("clip.vision.projector.scale_factor").value(), 3u);
    expect_tensor(**f, "v.position_embd.weight", GgmlType::kF32, {1152, 729});  // 27 x 27 patches (384 / 14)
    expect_tensor(**f, "mm.model.fc.weight", GgmlType::kF16, {1152 * 9, 64});
  }
  std::filesystem::remove(path);
}

TEST(RandomMmproj, UnknownPresetAndBadWidthAreRefused) {
  EXPECT_EQ(find_mmproj_preset("clip-h-999"), nullptr);
  EXPECT_FALSE(write_random_mmproj(one_layer("clip-l-336"), 1 << 20, 3, temp_path("vlkv_never.gguf")).is_ok());
}

}  // namespace
}  // namespace vlkv

namespace vlkv {
namespace {

// SmolVLM2-2.2B's SigLIP so400m-patch14-384: 384 px tiles are not a multiple of the 14-px patch;
// the conv covers 27 x 27 patches (378 px) as ggml_conv_2d does, and pixel shuffle 3 gives 81
// tokens per tile. vlkv refused such files before ("image_size is not a multiple of patch_size").
TEST(RandomMmproj, SiglipPatch14At384EncodesAsLlamaCppCountsIt) {
  const std::string path = temp_path("vlkv_mmproj_smolvlm2.gguf");
  MmprojPreset p = one_layer("siglip-so400m-idefics3");
  p.preproc_image_size = 384;  // one slice (the preset's 1536 makes any image 4 x 4 slices + overview: 17 x 81)
  ASSERT_TRUE(write_random_mmproj(p, 64, 3, path).is_ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  auto vm = VisionModel::load(**f);
  ASSERT_TRUE(vm.is_ok()) << vm.status().message();
  ThreadPool pool(2);
  auto e = (*vm)->encode_image(gradient(384, 384), pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  // 27 x 27 patches, pixel shuffle 3 -> 9 x 9 = 81 per ViT input; libmtmd always encodes the
  // overview and the slices (here one): 162.
  EXPECT_EQ(e->n_visual_tokens(), 162);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vlkv
