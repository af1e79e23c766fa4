// Text-decoder hyperparameters, read only from GGUF metadata under llama.cpp's
// key names ("{arch}.embedding_length", ...). Validated: a hostile or broken
// file gets a Status, never a decoder with impossible shapes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

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
  kGemma3,  // Gemma 3: scaled token embeddings, q/k RMS norms, post-attention/post-FFN norms,
            // GeGLU, NeoX RoPE, sliding-window layers with their own RoPE base (text/hparams_gemma3.cpp)
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

  // ---- gemma3 (all off for the other architectures) ----
  float embd_scale = 1.0f;     // token embeddings (not media embeddings) are multiplied by this
  bool post_norms = false;     // blk.N.post_attention_norm / post_ffw_norm on the block outputs
  bool ffn_geglu = false;      // FFN gelu(gate) * up (ggml's f16-table GELU) instead of silu
  // {arch}.attention.sliding_window: a sliding layer's query at position p sees keys at
  // positions > p - sliding_window (llama.cpp LLAMA_SWA_TYPE_STANDARD); 0: no sliding layers.
  int64_t sliding_window = 0;
  std::vector<uint8_t> layer_sliding;  // [n_layers] 1: sliding-window layer (empty: none)
  RopeParams rope_swa;                 // RoPE of the sliding layers ({arch}.rope.freq_base_swa)
  // A media chunk is decoded with non-causal attention among its own tokens (libmtmd's
  // mtmd_decode_use_non_causal: gemma3); the whole chunk must then be one step.
  bool media_non_causal = false;

  bool is_sliding(int64_t layer) const {
    return !layer_sliding.empty() && layer_sliding[static_cast<size_t>(layer)] != 0;
  }
  const RopeParams& rope_for(int64_t layer) const { return is_sliding(layer) ? rope_swa : rope; }
};

// Reads and validates the hyperparameters. Unsupported for an architecture we do not run.
Result<TextHparams> read_text_hparams(const GgufFile& gguf);

// KvGeometry::layer_window of this model: [n_layers] windows (0 = global layer), or empty
// when no layer slides.
std::vector<int32_t> kv_layer_windows(const TextHparams& hp);

// The gemma3 specifics (text/hparams_gemma3.cpp), after the common keys are read into hp:
// window, pattern, SWA RoPE, embedding scale, and refusal of keys vlkv does not implement.
Status read_gemma3_hparams(const GgufFile& gguf, TextHparams& hp);

}  // namespace vlkv
