// Writes a random-weight vision projector (mmproj GGUF) of a real model's geometry, with
// the keys, tensor names, shapes and types llama.cpp's converter writes (matrices F16;
// norms, biases and position embeddings F32), so vision encoders can be timed against
// llama-mtmd-cli on the same file. Presets name the geometries people run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vlkv/status.h"

namespace vlkv {

struct MmprojPreset {
  std::string name;             // --mmproj PRESET
  std::string description;
  std::string projector_type;   // clip.projector_type: mlp, gemma3, idefics3, qwen2.5vl_merger
  int64_t image_size = 0;       // clip.vision.image_size (pixels per side of one ViT input)
  int64_t patch_size = 0;
  int64_t n_embd = 0;           // ViT width
  int64_t n_ff = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_embd_out = 0;       // projector output = the text model's n_embd
  float eps = 1e-6f;
  bool clip_mean_std = false;   // CLIP's mean/std; else 0.5/0.5 (SigLIP)
  int64_t scale_factor = 0;     // clip.vision.projector.scale_factor (0: key not written)
  int64_t preproc_image_size = 0;  // idefics3: clip.vision.preproc_image_size (longest edge)
  int64_t n_wa_pattern = 0;     // qwen2.5vl: a full-attention layer every n (window attention otherwise)
};

// The presets: clip-l-336 (LLaVA-1.5/1.6, 7B text), siglip-so400m (Gemma 3 4B),
// siglip-so400m-idefics3 (SmolVLM2-2.2B), qwen2.5vl-3b.
const std::vector<MmprojPreset>& mmproj_presets();
const MmprojPreset* find_mmproj_preset(const std::string& name);

// n_embd_out <= 0 keeps the preset's; seed as RandomModelSpec's.
Status write_random_mmproj(MmprojPreset preset, int64_t n_embd_out, uint64_t seed, const std::string& path);

}  // namespace vlkv
