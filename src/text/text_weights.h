// The decoder's weights: non-owning views into the mapped GGUF for the big
// matrices, small owned f32 copies of norms and biases. Every tensor's type and
// shape is checked against the hyperparameters at load.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kernels/matmul.h"
#include "text/hparams.h"
#include "vlkv/status.h"

namespace vlkv {

class ThreadPool;

struct LayerWeights {
  std::vector<float> attn_norm;   // [n_embd]
  WeightMatrix wq;                // [n_heads*head_dim rows, n_embd cols]
  WeightMatrix wk;                // [n_kv_heads*head_dim, n_embd]
  WeightMatrix wv;                // [n_kv_heads*head_dim, n_embd]
  WeightMatrix wo;                // [n_embd, n_heads*head_dim]
  std::vector<float> bq, bk, bv;  // qwen2 biases, empty otherwise
  std::vector<float> q_norm, k_norm;  // [head_dim] per-head RMSNorm weights (qwen3vl, gemma3), empty otherwise
  std::vector<float> ffn_norm;    // [n_embd]
  WeightMatrix w_gate;            // [n_ff, n_embd]
  WeightMatrix w_up;              // [n_ff, n_embd]
  WeightMatrix w_down;            // [n_embd, n_ff]
  // gemma3 (empty otherwise): RMSNorm of the attention and FFN outputs
  std::vector<float> attn_post_norm;        // [n_embd]
  std::vector<float> ffn_post_norm;         // [n_embd]

  // The seven projection matrices, in the order decode reads them.
  std::array<WeightMatrix*, 7> matrices() { return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down}; }
  std::array<const WeightMatrix*, 7> matrices() const { return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down}; }
};

struct TextWeights {
  WeightMatrix token_embd;        // [n_vocab, n_embd]
  std::vector<float> output_norm; // [n_embd]
  WeightMatrix output;            // [n_vocab, n_embd]; token_embd when tied
  std::vector<LayerWeights> layers;
  uint64_t total_bytes = 0;       // bytes of all tensors used
  // The matrices repacked at load (WeightMatrix::packed_rows8) point into this arena; shared
  // so copies of the struct stay valid.
  std::vector<std::shared_ptr<uint8_t[]>> packed;
  uint64_t packed_bytes = 0;
};

// The GgufFile must outlive the returned views. round_activations_q8: see WeightMatrix. With
// it and pack_rows, the K-quant matrices that can (quant/k_packed.h: n_rows % 8 == 0, the
// current SIMD tier has the packed kernel) are repacked into owned memory and their file
// pages released, so resident memory does not grow; token_embd (row lookups) stays as is.
// pool (optional) packs on its threads; the packed bytes do not depend on it.
Result<TextWeights> bind_text_weights(const GgufFile& gguf, const TextHparams& hp, bool round_activations_q8 = false,
                                      bool pack_rows = true, ThreadPool* pool = nullptr);

}  // namespace vlkv
