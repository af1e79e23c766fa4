// Writes a random-weight Llama-family GGUF (llama, qwen2, qwen2vl) that llama.cpp loads: llama.cpp's metadata keys
// and tensor names/dims, a SentencePiece vocabulary with byte fallback (any text
// tokenizes), weights quantized with src/quant's reference quantizers. Tensor data is
// generated and written one tensor at a time, so memory stays at one tensor.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_types.h"
#include "vlkv/status.h"

namespace vlkv {

struct RandomModelSpec {
  std::string name = "vlkv-random-llama";  // general.name
  // general.architecture: llama; qwen2 (q/k/v biases, NEOX RoPE); qwen2vl (qwen2 + M-RoPE
  // sections t = head_dim/8, h = w = (head_dim/2 - t)/2 rotary pairs: Qwen2/2.5-VL's 16/24/24 at 128);
  // qwen3vl (q/k norms, no biases, interleaved M-RoPE 24/20/20 at 128, n_deepstack_layers 3 as
  // Qwen3-VL-2B..8B); gemma3 (q/k norms, post norms, sliding window 1024 every layer but each 6th,
  // rope.freq_base_swa 1e4, output always tied as Gemma 3's).
  std::string arch = "llama";
  int64_t n_embd = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;
  int64_t head_dim = 64;       // key_length/value_length are written when != n_embd / n_heads
  int64_t n_ff = 768;
  int64_t n_vocab = 512;       // >= 259: <unk>, <s>, </s> and the 256 byte tokens
  int64_t context_length = 2048;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  // Matrices (token_embd, output, attention, ffn); norms are always f32. Row lengths
  // (n_embd, n_heads * head_dim, n_ff) must be multiples of the type's block size.
  GgmlType weight_type = GgmlType::kQ8_0;
  // K_M mix (weight_type Q4_K or Q5_K): as llama.cpp's quantize writes Q4_K_M / Q5_K_M, output,
  // and attn_v and ffn_down of the first and last eighth of the layers and of every third
  // layer between, are Q6_K (llama-quant.cpp's use_more_bits).
  bool k_m_mix = false;
  bool tied_output = false;    // no output.weight: llama.cpp reuses token_embd
  uint64_t seed = 42;
};

// Weights: token_embd ~ N(0, 0.5) (variance), linear ~ N(0, 1/fan_in), norm weights
// 1 + N(0, 0.1^2). Deterministic for a given spec on a given standard library.
Status write_random_llama(const RandomModelSpec& spec, const std::string& path);

}  // namespace vlkv
