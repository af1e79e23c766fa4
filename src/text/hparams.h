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
  kQwen3Vl, // Qwen3 blocks (per-head q/k RMSNorm, no biases) + interleaved M-RoPE (ggml's
            // IMROPE: pair i takes t, h or w by i % 3 within the sections) + deepstack:
            // media rows carry n_deepstack_layers extra n_embd parts, part k added to the
            // residual stream after layer k-1 (llama.cpp's qwen3vl).
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
  std::array<int, 4> rope_sections{};  // qwen2vl/qwen3vl: rotary pairs per position component (t, h, w, -)
  bool rope_interleaved = false;       // qwen3vl: sections interleaved (IMROPE), not consecutive
  bool qk_norm = false;       // per-head RMSNorm of q and k before RoPE (attn_q_norm / attn_k_norm)
  // {arch}.n_deepstack_layers: an input embedding row (media) is n_embd_inp() wide; part k
  // (k = 1..n) is added to the hidden state after layer k-1. Token rows add nothing.
  int64_t n_deepstack_layers = 0;
  bool tied_output = false;   // no output.weight: reuse token_embd
  bool qkv_bias = false;

  // Width of one input embedding row (llama.cpp's n_embd_inp): the main part and the
  // per-layer additions.
  int64_t n_embd_inp() const { return n_embd * (1 + n_deepstack_layers); }
  // Media rows take M-RoPE (t, h, w) positions (qwen2vl_positions.h).
  bool uses_mrope() const { return arch == TextArch::kQwen2Vl || arch == TextArch::kQwen3Vl; }
};

// Reads and validates the hyperparameters. Unsupported for an architecture we do not run.
Result<TextHparams> read_text_hparams(const GgufFile& gguf);

}  // namespace vlkv
