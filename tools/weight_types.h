// Weight type names as the model tools take them (gen-model, quantize): one ggml type for
// every matrix, or llama.cpp's K_M mixes, and the llama_ftype a file of them declares.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_types.h"
#include "vlkv/status.h"

namespace vlkv {

struct WeightTypeChoice {
  GgmlType type = GgmlType::kQ8_0;
  // llama.cpp's Q4_K_M / Q5_K_M: output, and attn_v and ffn_down of the layers that
  // k_m_more_bits picks, are Q6_K; type (Q4_K or Q5_K) everywhere else.
  bool k_m_mix = false;
};

// The names listed by weight_type_names(): f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k
// q4_k_m q5_k_m. InvalidArgument for anything else.
Result<WeightTypeChoice> parse_weight_type(const std::string& name);
const char* weight_type_names();

// llama.cpp's general.file_type (llama_ftype) for a file of this choice; -1 where none fits.
int64_t llama_file_type(const WeightTypeChoice& choice);

// llama-quant.cpp's use_more_bits: the first and last eighth of the layers, and every third
// layer between, get Q6_K attn_v and ffn_down in a K_M mix.
bool k_m_more_bits(int64_t layer, int64_t n_layers);

}  // namespace vlkv
