// Random tensors for the model generators (gen-model): each tensor's values are drawn
// from its own seed (the file seed and the tensor's name), and encoded into its GGUF type
// row by row while the writer streams the file, so a large model is never in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_types.h"
#include "gguf/gguf_writer.h"
#include "vlkv/status.h"

namespace vlkv {

// What a tensor holds, which sets its distribution:
//   kEmbedding N(0, 0.5) (variance); kLinear N(0, 1/fan_in), fan_in = dims[0] (a conv kernel's kw*kh*c_in);
//   kNorm 1 + N(0, 0.1^2); kBias and kPosition N(0, 0.02^2) (ViT biases, learned
//   position and class embeddings are small next to the patch embeddings).
enum class Init { kEmbedding, kLinear, kNorm, kBias, kPosition };

// A per-tensor seed, so each tensor's values do not depend on the order of generation.
uint64_t tensor_seed(uint64_t seed, const std::string& name);

// Encodes one f32 row as `type` into dst (the type's row bytes for n elements).
Status encode_row(GgmlType type, const float* src, int64_t n, uint8_t* dst);

// Adds a tensor whose rows are drawn and encoded when the writer streams it out.
// dims in ggml order (dims[0] contiguous); rows are dims[0] long, the rest is the row count.
Status add_random(GgufWriter& w, const std::string& name, GgmlType type, std::vector<int64_t> dims, Init init,
                  uint64_t seed);

}  // namespace vlkv
