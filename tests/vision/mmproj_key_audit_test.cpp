// mmproj keys and tensors that change llama.cpp's computation but that vlkv's mlp (LLaVA)
// and idefics3 projectors do not implement must be refused with a message naming them
// (docs/refused_keys_llava_idefics3.md). Each case rewrites a fixture mmproj with one change.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "vision/vision_model.h"
#include "vlm_fixture_util.h"

namespace vlkv {
namespace {

using Edit = std::function<void(GgufWriter&)>;

struct Rewrite {
  std::set<std::string> drop_keys;
  std::map<std::string, std::string> rename_tensors;  // old name -> new name
  Edit edit;                                          // extra keys / tensors
};

// fixtures/models/<src> with the rewrite applied, written to a temp file; returns its path.
std::string rewrite(const std::string& src, const std::string& name, const Rewrite& r) {
  Result<std::unique_ptr<GgufFile>> in = GgufFile::open(vlm_test::fixtures() + "/models/" + src);
  EXPECT_TRUE(in.is_ok()) << in.status().message();
  if (!in.is_ok()) return "";
  GgufWriter w;
  for (const auto& [key, value] : (*in)->metadata()) {
    if (!r.drop_keys.count(key)) w.set(key, value);
  }
  for (const GgufTensorInfo& t : (*in)->tensors()) {
    auto it = r.rename_tensors.find(t.name);
    const std::string out_name = it == r.rename_tensors.end() ? t.name : it->second;
    EXPECT_TRUE(w.add_tensor(out_name, t.type, t.dims, t.data, t.n_bytes).is_ok()) << t.name;
  }
  if (r.edit) r.edit(w);
  const std::string path = ::testing::TempDir() + "vlkv_audit_" + std::to_string(getpid()) + "_" + name + ".gguf";
  EXPECT_TRUE(w.write_to_file(path).is_ok());
  return path;
}

Status load_status(const std::string& path) {
  Result<std::unique_ptr<GgufFile>> g = GgufFile::open(path);
  if (!g.is_ok()) return g.status();
  Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(**g);
  return vm.is_ok() ? Status::ok() : vm.status();
}

void expect_refused(const std::string& src, const std::string& name, const Rewrite& r, const std::string& named) {
  SCOPED_TRACE(name);
  const std::string path = rewrite(src, name, r);
  const Status st = load_status(path);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find(named), std::string::npos) << st.message();
  std::remove(path.c_str());
}

Rewrite set_value(const std::string& key, GgufValue v) {
  Rewrite r;
  r.edit = [=](GgufWriter& w) { w.set(key, v); };
  return r;
}

Rewrite add_vector(const std::string& tensor, int64_t n) {
  Rewrite r;
  r.edit = [=](GgufWriter& w) {
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    ASSERT_TRUE(w.add_tensor(tensor, GgmlType::kF32, {n}, ones.data(), ones.size() * sizeof(float)).is_ok());
  };
  return r;
}

constexpr const char* kLlava16 = "mmproj-tiny-llava16.gguf";  // mlp, ViT width 32, 2 heads, FFN 64
constexpr const char* kIdefics3 = "mmproj-tiny-idefics3.gguf";  // idefics3, ViT width 32, 2 heads, FFN 64

TEST(MmprojKeyAudit, FixturesLoadUnchanged) {
  for (const char* src : {kLlava16, kIdefics3}) {
    const std::string path = rewrite(src, "unchanged", {});
    const Status st = load_status(path);
    EXPECT_TRUE(st.is_ok()) << src << ": " << st.message();
    std::remove(path.c_str());
  }
}

TEST(MmprojKeyAudit, MlpRefusesWhatItDoesNotImplement) {
  const std::string pins = "clip.vision.image_grid_pinpoints";
  expect_refused(kLlava16, "pins_odd", set_value(pins, gguf_i32_array(std::vector<int32_t>{32, 64, 64})),
                 pins);
  expect_refused(kLlava16, "pins_partial_tile",
                 set_value(pins, gguf_i32_array(std::vector<int32_t>{32, 64, 48, 32})), pins);
  expect_refused(kLlava16, "head_count_kv", set_value("clip.vision.attention.head_count_kv", gguf_u32(1)),
                 "clip.vision.attention.head_count_kv");
  expect_refused(kLlava16, "head_dim", set_value("clip.vision.attention.head_dim", gguf_u32(8)),
                 "clip.vision.attention.head_dim");
  expect_refused(kLlava16, "use_silu", set_value("clip.use_silu", gguf_bool(true)), "clip.use_silu");
  // A square FFN: llama.cpp swaps ffn_up / ffn_down for mlp files then.
  expect_refused(kLlava16, "square_ffn", set_value("clip.vision.feed_forward_length", gguf_u32(32)),
                 "clip.vision.feed_forward_length");
  expect_refused(kLlava16, "mlp_norm", add_vector("mm.3.weight", 64), "mm.3.weight");
  // Legacy swapped names: what is called ffn_down maps n_embd -> n_ff.
  Rewrite swapped;
  for (int il = 0; il < 2; ++il) {
    const std::string p = "v.blk." + std::to_string(il) + ".";
    swapped.rename_tensors[p + "ffn_up.weight"] = p + "ffn_down.weight";
    swapped.rename_tensors[p + "ffn_down.weight"] = p + "ffn_up.weight";
    swapped.rename_tensors[p + "ffn_up.bias"] = p + "ffn_down.bias";
    swapped.rename_tensors[p + "ffn_down.bias"] = p + "ffn_up.bias";
  }
  expect_refused(kLlava16, "legacy_ffn_names", swapped, "v.blk.0.ffn_down.weight");
}

// The other llava-family projector types llama.cpp knows are refused by name.
TEST(MmprojKeyAudit, OtherLlavaProjectorTypesAreRefused) {
  for (const char* type : {"ldp", "ldpv2", "mlp_norm", "minicpmv", "glm_edge", "cogvlm", "janus_pro"}) {
    expect_refused(kLlava16, std::string("type_") + type, set_value("clip.projector_type", gguf_string(type)),
                   std::string("projector type '") + type + "'");
  }
}

TEST(MmprojKeyAudit, Idefics3RefusesWhatItDoesNotImplement) {
  expect_refused(kIdefics3, "head_count_kv", set_value("clip.vision.attention.head_count_kv", gguf_u32(1)),
                 "clip.vision.attention.head_count_kv");
  expect_refused(kIdefics3, "head_dim", set_value("clip.vision.attention.head_dim", gguf_u32(8)),
                 "clip.vision.attention.head_dim");
  expect_refused(kIdefics3, "square_ffn", set_value("clip.vision.feed_forward_length", gguf_u32(32)),
                 "clip.vision.feed_forward_length");
  for (const char* t : {"ls1", "ls2", "out_scale", "attn_post_norm", "ffn_post_norm"}) {
    const std::string name = std::string("v.blk.1.") + t + ".weight";
    expect_refused(kIdefics3, t, add_vector(name, 32), name);
  }
  expect_refused(kIdefics3, "pre_ln", add_vector("v.pre_ln.weight", 32), "v.pre_ln.weight");
  expect_refused(kIdefics3, "q_norm", add_vector("v.blk.0.attn_q_norm.weight", 16),
                 "v.blk.0.attn_q_norm.weight");
  expect_refused(kIdefics3, "k_norm", add_vector("v.blk.0.attn_k_norm.weight", 16),
                 "v.blk.0.attn_k_norm.weight");
}

// Without the pinpoints key the same weights are LLaVA-1.5: one tile, padded to a square.
// With it, never one tile for an image larger than the tile.
TEST(MmprojKeyAudit, PinpointsKeyDecidesTheTiling) {
  Rewrite no_pins;
  no_pins.drop_keys = {"clip.vision.image_grid_pinpoints"};
  const std::string path = rewrite(kLlava16, "no_pinpoints", no_pins);
  ThreadPool pool(1);
  for (const bool with_pins : {true, false}) {
    Result<std::unique_ptr<GgufFile>> g =
        GgufFile::open(with_pins ? vlm_test::fixtures() + "/models/" + kLlava16 : path);
    ASSERT_TRUE(g.is_ok());
    Result<std::unique_ptr<VisionModel>> vm = VisionModel::load(**g);
    ASSERT_TRUE(vm.is_ok()) << vm.status().message();
    Result<MediaEmbedding> e = (*vm)->encode_image(vlm_test::test_image(), pool);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    EXPECT_EQ(e->n_visual_tokens(), with_pins ? 80 : 16);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace vlkv
