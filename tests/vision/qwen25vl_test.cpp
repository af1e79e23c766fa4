// Qwen2.5-VL ("qwen2.5vl_merger") on tiny random-weight mmprojs built with the GGUF
// writer: RMSNorm, gated SiLU MLP, window attention with the window reordering of
// patches. No reference outputs exist for this family: shapes, token counts, the
// window order (hand-computed), window attention = full attention when one window
// covers the image, and the reordering undone at the end are what is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "vision/qwen2vl_model.h"
#include "vision/vision_model.h"

namespace vlkv {
namespace {

constexpr int kPatch = 4, kEmbd = 32, kHeads = 2, kFf = 48, kLayers = 2, kOut = 24;

struct Spec {
  int window_size = 16;   // pixels: 16 / (4 * 2) = 2 merged tokens a side
  int n_wa_pattern = 2;   // layer 1 full, layer 0 windowed; 1 = every layer full (patches
                          // still reordered); 0 = window attention off (no reordering)
  bool zero_attn_out = false;
  bool wa_indexes = false;  // write clip.vision.wa_layer_indexes = {1} instead of the pattern
  bool no_pattern = false;  // write neither key
  bool both_disagree = false;  // n_wa_pattern = 2 and wa_layer_indexes = {0}
  int head_count_kv = 0;       // > 0: write clip.vision.attention.head_count_kv
  int head_dim_key = 0;        // > 0: write clip.vision.attention.head_dim
  const char* projector = "qwen2.5vl_merger";
};

std::string write_mmproj(const Spec& s, const std::string& name) {
  GgufWriter w;
  w.set_string("general.architecture", "clip");
  w.set_bool("clip.has_vision_encoder", true);
  w.set_string("clip.projector_type", s.projector);
  w.set_u32("clip.vision.image_size", 64);
  w.set_u32("clip.vision.patch_size", kPatch);
  w.set_u32("clip.vision.embedding_length", kEmbd);
  w.set_u32("clip.vision.feed_forward_length", kFf);
  w.set_u32("clip.vision.block_count", kLayers);
  w.set_u32("clip.vision.attention.head_count", kHeads);
  w.set_u32("clip.vision.projection_dim", kOut);
  w.set_f32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
  const float mean[3] = {0.48f, 0.46f, 0.41f}, stdv[3] = {0.27f, 0.26f, 0.28f};
  w.set("clip.vision.image_mean", gguf_f32_array(mean));
  w.set("clip.vision.image_std", gguf_f32_array(stdv));
  w.set_bool("clip.use_silu", true);
  w.set_u32("clip.vision.spatial_merge_size", 2);
  w.set_u32("clip.vision.window_size", static_cast<uint32_t>(s.window_size));
  if (s.no_pattern) {
  } else if (s.wa_indexes) {
    const int32_t idx[1] = {1};
    w.set("clip.vision.wa_layer_indexes", gguf_i32_array(idx));
  } else {
    w.set_u32("clip.vision.n_wa_pattern", static_cast<uint32_t>(s.n_wa_pattern));
  }
  if (s.both_disagree) {
    const int32_t idx[1] = {0};
    w.set("clip.vision.wa_layer_indexes", gguf_i32_array(idx));
  }
  if (s.head_count_kv > 0) w.set_u32("clip.vision.attention.head_count_kv", static_cast<uint32_t>(s.head_count_kv));
  if (s.head_dim_key > 0) w.set_u32("clip.vision.attention.head_dim", static_cast<uint32_t>(s.head_dim_key));
  std::mt19937 rng(1234);  // same weights for every spec
  auto add = [&](const std::string& n, std::vector<int64_t> dims, float scale, float offset = 0.0f, bool zero = false) {
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = zero ? 0.0f : offset + scale * dist(rng);
    ASSERT_TRUE(w.add_tensor(n, GgmlType::kF32, dims, v.data(), v.size() * sizeof(float)).is_ok());
  };
  add("v.patch_embd.weight", {kPatch, kPatch, 3, kEmbd}, 0.2f);
  add("v.patch_embd.weight.1", {kPatch, kPatch, 3, kEmbd}, 0.2f);
  for (int il = 0; il < kLayers; ++il) {
    const std::string b = "v.blk." + std::to_string(il) + ".";
    add(b + "ln1.weight", {kEmbd}, 0.1f, 1.0f);
    add(b + "ln2.weight", {kEmbd}, 0.1f, 1.0f);
    for (const char* t : {"attn_q", "attn_k", "attn_v"}) {
      add(b + t + ".weight", {kEmbd, kEmbd}, 0.3f);
      add(b + t + ".bias", {kEmbd}, 0.1f);
    }
    add(b + "attn_out.weight", {kEmbd, kEmbd}, 0.2f, 0.0f, s.zero_attn_out);
    add(b + "attn_out.bias", {kEmbd}, 0.1f, 0.0f, s.zero_attn_out);
    add(b + "ffn_gate.weight", {kEmbd, kFf}, 0.2f);
    add(b + "ffn_gate.bias", {kFf}, 0.1f);
    add(b + "ffn_up.weight", {kEmbd, kFf}, 0.2f);
    add(b + "ffn_up.bias", {kFf}, 0.1f);
    add(b + "ffn_down.weight", {kFf, kEmbd}, 0.2f);
    add(b + "ffn_down.bias", {kEmbd}, 0.1f);
  }
  add("v.post_ln.weight", {kEmbd}, 0.1f, 1.0f);
  add("mm.0.weight", {4 * kEmbd, 4 * kEmbd}, 0.1f);
  add("mm.0.bias", {4 * kEmbd}, 0.1f);
  add("mm.2.weight", {4 * kEmbd, kOut}, 0.1f);
  add("mm.2.bias", {kOut}, 0.1f);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("vlkv_qwen25vl_" + std::to_string(::getpid()) + "_" + name + ".gguf")).string();
  EXPECT_TRUE(w.write_to_file(path).is_ok());
  return path;
}

// A 48 x 32 picture: 6 x 4 merged tokens (align 8), 12 x 8 patches.
Image picture() {
  Image img;
  img.width = 48;
  img.height = 32;
  img.pixels.resize(48 * 32 * 3);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 48; ++x) {
      uint8_t* p = &img.pixels[(static_cast<size_t>(y) * 48 + x) * 3];
      p[0] = static_cast<uint8_t>(x * 5);
      p[1] = static_cast<uint8_t>(y * 7);
      p[2] = static_cast<uint8_t>((x * y * 3) & 255);
    }
  }
  return img;
}

struct Loaded {
  std::string path;
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<VisionModel> model;
  ~Loaded() {
    model.reset();
    gguf.reset();
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

std::unique_ptr<Loaded> load(const Spec& s, const std::string& name) {
  auto l = std::make_unique<Loaded>();
  l->path = write_mmproj(s, name);
  Result<std::unique_ptr<GgufFile>> g = GgufFile::open(l->path);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return nullptr;
  l->gguf = std::move(g).value();
  Result<std::unique_ptr<VisionModel>> m = VisionModel::load(*l->gguf);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return nullptr;
  l->model = std::move(m).value();
  return l;
}

std::vector<float> embed(const VisionModel& m, ThreadPool& pool) {
  Result<MediaEmbedding> e = m.encode_image(picture(), pool);
  EXPECT_TRUE(e.is_ok()) << e.status().message();
  if (!e.is_ok() || e->pieces.size() != 3) return {};
  return e->pieces[1].embd.data;
}

double max_abs(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

TEST(Qwen25Vl, WindowOrderIsAPermutation) {
  // 4 x 6 merged grid, windows of 2: six 2 x 2 tiles, row-major.
  const Qwen2VlWindows w = qwen2vl_windows(4, 6, 2);
  EXPECT_EQ(w.order, (std::vector<int64_t>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11,
                                           12, 13, 18, 19, 14, 15, 20, 21, 16, 17, 22, 23}));
  EXPECT_EQ(w.lengths, (std::vector<int64_t>(6, 4)));
  // Ragged edges: 3 x 5 grid -> tiles 2x2, 2x2, 2x1, 1x2, 1x2, 1x1.
  const Qwen2VlWindows r = qwen2vl_windows(3, 5, 2);
  EXPECT_EQ(r.order, (std::vector<int64_t>{0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 12, 13, 14}));
  EXPECT_EQ(r.lengths, (std::vector<int64_t>{4, 4, 2, 2, 2, 1}));
  std::vector<int64_t> sorted = r.order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(15);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  // A window covering the grid is the identity.
  const Qwen2VlWindows all = qwen2vl_windows(4, 6, 8);
  EXPECT_EQ(all.lengths, (std::vector<int64_t>{24}));
  std::vector<int64_t> id(24);
  std::iota(id.begin(), id.end(), 0);
  EXPECT_EQ(all.order, id);
}

TEST(Qwen25Vl, ShapesAndTokenCounts) {
  ThreadPool pool(2);
  auto l = load(Spec{}, "shapes");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->model->projector_type(), "qwen2.5vl_merger");
  EXPECT_EQ(l->model->n_embd_out(), kOut);
  Result<MediaEmbedding> e = l->model->encode_image(picture(), pool);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  ASSERT_EQ(e->pieces.size(), 3u);
  EXPECT_EQ(e->pieces[0].text, "<|vision_start|>");
  EXPECT_EQ(e->pieces[2].text, "<|vision_end|>");
  const EmbeddingRun& r = e->pieces[1].embd;
  EXPECT_EQ(r.grid_t, 1);
  EXPECT_EQ(r.grid_h, 4);
  EXPECT_EQ(r.grid_w, 6);
  EXPECT_EQ(r.n_tokens, 24);
  ASSERT_EQ(r.data.size(), static_cast<size_t>(24 * kOut));
  for (float v : r.data) ASSERT_TRUE(std::isfinite(v));
  // Video: 3 frames -> 2 temporal patches of 24 tokens.
  Result<MediaEmbedding> v = l->model->encode_video({picture(), picture(), picture()}, pool, nullptr);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_EQ(v->pieces[1].embd.grid_t, 2);
  EXPECT_EQ(v->n_visual_tokens(), 48);
}

TEST(Qwen25Vl, WindowCoveringTheImageEqualsFullAttention) {
  ThreadPool pool(2);
  Spec big;
  big.window_size = 64;  // 8 merged tokens a side > 6 x 4 grid: one window
  Spec full;
  full.n_wa_pattern = 0;  // no window attention: full attention, row-major patches
  auto a = load(big, "big"), b = load(full, "full");
  ASSERT_TRUE(a && b);
  const std::vector<float> ea = embed(*a->model, pool), eb = embed(*b->model, pool);
  ASSERT_FALSE(ea.empty());
  EXPECT_EQ(ea, eb);  // one window is the identity order and the same attention
  // Small windows really restrict attention: the output changes.
  auto c = load(Spec{}, "small");
  ASSERT_TRUE(c);
  const std::vector<float> ec = embed(*c->model, pool);
  EXPECT_GT(max_abs(ec, eb), 1e-3);
  // wa_layer_indexes = {1} is the same layer choice as n_wa_pattern = 2.
  Spec idx;
  idx.wa_indexes = true;
  auto d = load(idx, "idx");
  ASSERT_TRUE(d);
  EXPECT_EQ(embed(*d->model, pool), ec);
}

TEST(Qwen25Vl, ReorderedFullAttentionEqualsRowMajor) {
  // Every layer full but patches in window order (2 x 2 windows): attention does not
  // care about token order, so after the final un-permutation the rows must equal the
  // row-major model's to float rounding (summation order differs); a misplaced row or
  // a position (RoPE) not moved with its patch would differ by O(1).
  ThreadPool pool(2);
  Spec reordered;
  reordered.n_wa_pattern = 1;
  Spec plain;
  plain.n_wa_pattern = 0;
  auto a = load(reordered, "reord"), b = load(plain, "plain");
  ASSERT_TRUE(a && b);
  const std::vector<float> ea = embed(*a->model, pool), eb = embed(*b->model, pool);
  ASSERT_EQ(ea.size(), static_cast<size_t>(24 * kOut));
  double scale = 0;
  for (float v : eb) scale = std::max(scale, std::fabs(double(v)));
  std::printf("qwen2.5vl reordered vs row-major: max abs %.3g (max |x| %.3g)\n", max_abs(ea, eb), scale);
  EXPECT_LE(max_abs(ea, eb), 1e-4 * std::max(1.0, scale));
}

TEST(Qwen25Vl, ReorderingIsUndoneAtTheEnd) {
  // With the attention output zeroed every token is processed on its own, so the
  // windowed model must give the full-attention model's rows in the same order.
  ThreadPool pool(2);
  Spec win;
  win.zero_attn_out = true;
  Spec full = win;
  full.n_wa_pattern = 1;
  auto a = load(win, "zwin"), b = load(full, "zfull");
  ASSERT_TRUE(a && b);
  const std::vector<float> ea = embed(*a->model, pool), eb = embed(*b->model, pool);
  ASSERT_EQ(ea.size(), static_cast<size_t>(24 * kOut));
  EXPECT_LE(max_abs(ea, eb), 1e-5);
  // ... and the rows differ from each other, so a misplaced row would show.
  for (int i = 1; i < 24; ++i) {
    EXPECT_NE(std::vector<float>(ea.begin(), ea.begin() + kOut),
              std::vector<float>(ea.begin() + i * kOut, ea.begin() + (i + 1) * kOut));
  }
}

TEST(Qwen25Vl, RejectsBadWindowMetadata) {
  Spec none;
  none.no_pattern = true;  // llama.cpp requires n_wa_pattern for qwen2.5vl_merger
  Spec bad;
  bad.window_size = 12;    // not a multiple of patch * merge = 8
  for (const auto& [spec, name] : {std::pair{none, "nopattern"}, std::pair{bad, "badwin"}}) {
    const std::string path = write_mmproj(spec, name);
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(path);
    ASSERT_TRUE(g.is_ok());
    Result<std::unique_ptr<VisionModel>> m = VisionModel::load(**g);
    EXPECT_FALSE(m.is_ok()) << name;
    if (!m.is_ok()) {
      EXPECT_EQ(m.status().code(), StatusCode::kInvalidFile) << m.status().message();
    }
    g->reset();
    std::filesystem::remove(path);
  }
}

// Keys that change llama.cpp's computation and that this encoder does not implement are
// refused by name (docs/refused_keys_qwen2vl.md), never ignored.
TEST(Qwen25Vl, RefusesUnimplementedKeysByName) {
  Spec gqa;
  gqa.head_count_kv = 1;
  Spec hd;
  hd.head_dim_key = 8;  // != 32 / 2
  Spec both;
  both.both_disagree = true;
  Spec q2;
  q2.projector = "qwen2vl_merger";  // n_wa_pattern = 2 written: windows are not Qwen2-VL's
  Spec agree;                       // the values llama.cpp would compute with are accepted
  agree.head_count_kv = kHeads;
  agree.head_dim_key = kEmbd / kHeads;
  const std::pair<Spec, const char*> cases[] = {{gqa, "clip.vision.attention.head_count_kv"},
                                                {hd, "clip.vision.attention.head_dim"},
                                                {both, "clip.vision.wa_layer_indexes"},
                                                {q2, "clip.vision.n_wa_pattern"},
                                                {agree, ""}};
  int i = 0;
  for (const auto& [spec, key] : cases) {
    const std::string path = write_mmproj(spec, "refuse" + std::to_string(i++));
    Result<std::unique_ptr<GgufFile>> g = GgufFile::open(path);
    ASSERT_TRUE(g.is_ok());
    Result<std::unique_ptr<VisionModel>> m = VisionModel::load(**g);
    if (*key) {
      ASSERT_FALSE(m.is_ok()) << key;
      EXPECT_EQ(m.status().code(), StatusCode::kUnsupported) << m.status().message();
      EXPECT_NE(m.status().message().find(key), std::string::npos) << m.status().message();
    } else {
      EXPECT_TRUE(m.is_ok()) << m.status().message();
    }
    g->reset();
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace vlkv
