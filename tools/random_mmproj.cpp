#include "random_mmproj.h"

#include "gguf/gguf_writer.h"
#include "random_tensor.h"

namespace vlkv {
namespace {

constexpr GgmlType kF16 = GgmlType::kF16;
constexpr GgmlType kF32 = GgmlType::kF32;

// What each projector's ViT block looks like in llama.cpp's tensor names.
struct BlockShape {
  bool layer_norm = true;   // LayerNorm with bias; false: RMSNorm (weight only)
  bool gated_ffn = false;   // ffn_gate + ffn_up (SiLU) with biases; else ffn_up / ffn_down
};

Status add_vit_block(GgufWriter& w, const MmprojPreset& p, const BlockShape& b, int64_t l, uint64_t seed) {
  const std::string pre = "v.blk." + std::to_string(l) + ".";
  const int64_t d = p.n_embd;
  auto norm = [&](const std::string& n) -> Status {
    VLKV_RETURN_IF_ERROR(add_random(w, pre + n + ".weight", kF32, {d}, Init::kNorm, seed));
    if (b.layer_norm) return add_random(w, pre + n + ".bias", kF32, {d}, Init::kBias, seed);
    return Status::ok();
  };
  auto linear = [&](const std::string& n, int64_t in, int64_t out) -> Status {
    VLKV_RETURN_IF_ERROR(add_random(w, pre + n + ".weight", kF16, {in, out}, Init::kLinear, seed));
    return add_random(w, pre + n + ".bias", kF32, {out}, Init::kBias, seed);
  };
  VLKV_RETURN_IF_ERROR(norm("ln1"));
  for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) VLKV_RETURN_IF_ERROR(linear(n, d, d));
  VLKV_RETURN_IF_ERROR(norm("ln2"));
  if (b.gated_ffn) VLKV_RETURN_IF_ERROR(linear("ffn_gate", d, p.n_ff));
  VLKV_RETURN_IF_ERROR(linear("ffn_up", d, p.n_ff));
  return linear("ffn_down", p.n_ff, d);
}

Status check_preset(const MmprojPreset& p) {
  if (p.n_embd_out <= 0 || p.n_embd_out > (1 << 16)) {
    return invalid_argument("--n-embd-out " + std::to_string(p.n_embd_out) + " is out of range (1..65536)");
  }
  return Status::ok();
}

}  // namespace

const std::vector<MmprojPreset>& mmproj_presets() {
  static const std::vector<MmprojPreset> presets = [] {
    std::vector<MmprojPreset> v;
    // CLIP ViT-L/14 at 336 px as llava-1.5/1.6 use it: 24 layers, features from the second to
    // last, so the llava converter stores 23 (block_count 23); quick-GELU; MLP to Vicuna-7B's 4096.
    v.push_back({"clip-l-336", "CLIP ViT-L/14-336 + 2-layer MLP (LLaVA-1.5-7B)", "mlp", 336, 14, 1024, 4096, 23, 16,
                 4096, 1e-5f, true, 0, 0, 0});
    // SigLIP so400m at 896 px as Gemma 3 (4B) uses it: 27 layers, 4x4 average pool -> 256 tokens.
    v.push_back({"siglip-so400m", "SigLIP so400m-patch14-896 + Gemma 3 projector (Gemma 3 4B)", "gemma3", 896, 14, 1152,
                 4304, 27, 16, 2560, 1e-6f, false, 0, 0, 0});
    // SigLIP so400m at 384 px as SmolVLM2-2.2B uses it: pixel shuffle 3 -> 81 tokens per tile.
    v.push_back({"siglip-so400m-idefics3", "SigLIP so400m-patch14-384 + Idefics3 connector (SmolVLM2-2.2B)", "idefics3",
                 384, 14, 1152, 4304, 27, 16, 2048, 1e-6f, false, 3, 1536, 0});
    // Qwen2.5-VL-3B's ViT: 32 layers of width 1280, RMSNorm, gated SiLU FFN, 112-px windows with a
    // full-attention layer every 8th (7, 15, 23, 31), 2x2 merger to the 2048-wide text model.
    v.push_back({"qwen2.5vl-3b", "Qwen2.5-VL-3B vision tower + patch merger", "qwen2.5vl_merger", 560, 14, 1280, 3420,
                 32, 16, 2048, 1e-6f, true, 0, 0, 8});
    return v;
  }();
  return presets;
}

const MmprojPreset* find_mmproj_preset(const std::string& name) {
  for (const MmprojPreset& p : mmproj_presets())
    if (p.name == name) return &p;
  return nullptr;
}

Status write_random_mmproj(MmprojPreset p, int64_t n_embd_out, uint64_t seed, const std::string& path) {
  if (n_embd_out > 0) p.n_embd_out = n_embd_out;
  VLKV_RETURN_IF_ERROR(check_preset(p));
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  GgufWriter w;
  w.set_string("general.architecture", "clip");
  w.set_string("general.type", "mmproj");
  w.set_string("general.name", "vlkv-random-" + p.name);
  w.set_string("general.description", "random weights, geometry of " + p.description);
  w.set_u32("general.file_type", 1);  // mostly F16
  w.set_bool("clip.has_vision_encoder", true);
  w.set_string("clip.projector_type", p.projector_type);
  if (p.projector_type == "mlp") w.set_bool("clip.has_llava_projector", true);
  w.set_u32("clip.vision.projection_dim", u32(p.n_embd_out));
  w.set_u32("clip.vision.image_size", u32(p.image_size));
  w.set_u32("clip.vision.patch_size", u32(p.patch_size));
  w.set_u32("clip.vision.embedding_length", u32(p.n_embd));
  w.set_u32("clip.vision.feed_forward_length", u32(p.n_ff));
  w.set_u32("clip.vision.block_count", u32(p.n_layers));
  w.set_u32("clip.vision.attention.head_count", u32(p.n_heads));
  w.set_f32("clip.vision.attention.layer_norm_epsilon", p.eps);
  const float clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
  const float clip_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
  const float half[3] = {0.5f, 0.5f, 0.5f};
  w.set("clip.vision.image_mean", gguf_f32_array(p.clip_mean_std ? clip_mean : half));
  w.set("clip.vision.image_std", gguf_f32_array(p.clip_mean_std ? clip_std : half));

  const bool qwen = p.projector_type == "qwen2.5vl_merger";
  if (qwen) {
    w.set_bool("clip.use_silu", true);
    w.set_u32("clip.vision.n_wa_pattern", u32(p.n_wa_pattern));
    w.set_u32("clip.vision.spatial_merge_size", 2);
  } else {
    w.set_bool("clip.use_gelu", p.projector_type != "mlp");  // CLIP: quick-GELU
  }
  if (p.scale_factor > 0) w.set_u32("clip.vision.projector.scale_factor", u32(p.scale_factor));
  if (p.preproc_image_size > 0) w.set_u32("clip.vision.preproc_image_size", u32(p.preproc_image_size));

  const int64_t d = p.n_embd, ps = p.patch_size, grid = p.image_size / p.patch_size;
  // Patch embedding: conv kernels [patch, patch, 3, width] (Qwen: the Conv3D's two temporal halves).
  VLKV_RETURN_IF_ERROR(add_random(w, "v.patch_embd.weight", kF16, {ps, ps, 3, d}, Init::kLinear, seed));
  if (qwen) VLKV_RETURN_IF_ERROR(add_random(w, "v.patch_embd.weight.1", kF16, {ps, ps, 3, d}, Init::kLinear, seed));
  if (p.projector_type == "mlp") {
    VLKV_RETURN_IF_ERROR(add_random(w, "v.class_embd", kF32, {d}, Init::kPosition, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "v.position_embd.weight", kF32, {d, grid * grid + 1}, Init::kPosition, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "v.pre_ln.weight", kF32, {d}, Init::kNorm, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "v.pre_ln.bias", kF32, {d}, Init::kBias, seed));
  } else if (!qwen) {
    VLKV_RETURN_IF_ERROR(add_random(w, "v.patch_embd.bias", kF32, {d}, Init::kBias, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "v.position_embd.weight", kF32, {d, grid * grid}, Init::kPosition, seed));
  }
  const BlockShape block{.layer_norm = !qwen, .gated_ffn = qwen};
  for (int64_t l = 0; l < p.n_layers; ++l) VLKV_RETURN_IF_ERROR(add_vit_block(w, p, block, l, seed));
  if (p.projector_type != "mlp") {
    VLKV_RETURN_IF_ERROR(add_random(w, "v.post_ln.weight", kF32, {d}, Init::kNorm, seed));
    if (!qwen) VLKV_RETURN_IF_ERROR(add_random(w, "v.post_ln.bias", kF32, {d}, Init::kBias, seed));
  }

  const int64_t out = p.n_embd_out;
  if (p.projector_type == "mlp") {
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.0.weight", kF16, {d, out}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.0.bias", kF32, {out}, Init::kBias, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.2.weight", kF16, {out, out}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.2.bias", kF32, {out}, Init::kBias, seed));
  } else if (p.projector_type == "gemma3") {
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.soft_emb_norm.weight", kF32, {d}, Init::kNorm, seed));
    // Stored in HF's [vision, text] layout: ggml dims [text, vision], used transposed.
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.input_projection.weight", kF16, {out, d}, Init::kLinear, seed));
  } else if (p.projector_type == "idefics3") {
    const int64_t in = d * p.scale_factor * p.scale_factor;
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.model.fc.weight", kF16, {in, out}, Init::kLinear, seed));
  } else {  // qwen2.5vl_merger: 2x2 patches concatenated
    const int64_t in = 4 * d;
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.0.weight", kF16, {in, in}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.0.bias", kF32, {in}, Init::kBias, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.2.weight", kF16, {in, out}, Init::kLinear, seed));
    VLKV_RETURN_IF_ERROR(add_random(w, "mm.2.bias", kF32, {out}, Init::kBias, seed));
  }
  return w.write_to_file(path);
}

}  // namespace vlkv
