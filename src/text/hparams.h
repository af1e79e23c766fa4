// Text-decoder hyperparameters, read only from GGUF metadata under llama.cpp's
// key names ("{arch}.embedding_length", ...). Validated: a hostile or broken
// file gets a Status, never a decoder with impossible shapes.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "gguf/gguf_reader.h"
#include "kernels/ops.h"
#include "vlkv/status.h"

namespace vlkv {

enum class TextArch {
  kLlama,   // llama 2/3, SmolLM2, Vicuna, llama2.c models: normal RoPE, no biases
  kQwen2,   // NeoX RoPE, biases on q/k/v
  kQwen2Vl, // qwen2 + M-RoPE: rotary pairs split into sections driven by (t, h, w) positions.
            // For text tokens t = h = w, so M-RoPE equals NeoX RoPE; image positions come
            // with the vision path.
};

struct TextHparams {
  std::string arch_name;      // general.architecture
  TextArch arch = TextArch::kLlama;
  int64_t n_ctx_train = 0;    // {arch}.context_length
  int64_t n_embd = 0;         // {arch}.embedding_length
  int64_t n_layers = 0;       // {arch}.block_count
  int64_t n_ff = 0;           // {arch}.feed_forward_length
  int64_t n_heads = 0;        // {arch}.attention.head_count
  int64_t n_kv_heads = 0;     // {arch}.attention.head_count_kv (default n_heads)
  int64_t head_dim = 0;       // {arch}.attention.key_length (default n_embd / n_heads)
  int64_t n_vocab = 0;        // rows of token_embd
  float rms_eps = 1e-5f;      // {arch}.attention.layer_norm_rms_epsilon
  RopeParams rope;            // style from arch; base, scale, n_rot from metadata
  float attn_scale = 0.0f;    // 1/sqrt(head_dim)
  std::array<int, 4> rope_sections{};  // qwen2vl: rotary pairs per position component (t, h, w, -)
  bool tied_output = false;   // no output.weight: reuse token_embd
  bool qkv_bias = false;
};

// Reads and validates the hyperparameters. Unsupported for an architecture we do not run.
Result<TextHparams> read_text_hparams(const GgufFile& gguf);

}  // namespace vlkv
