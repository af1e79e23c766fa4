// `vlkv quantize`: a text model GGUF (f32 / f16 / bf16 matrices, as converted from a
// checkpoint) rewritten with its matrices in a block format, as llama.cpp's llama-quantize
// does: the same metadata (general.file_type updated), norms, biases and 1-D tensors kept,
// matrices already in a block format kept as they are. A row length the format's block does
// not divide falls back the way llama-quantize does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K ->
// Q8_0), else the tensor is kept. Rows are quantized with src/quant's reference quantizers
// while the file streams out, so memory stays at one tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weight_types.h"

namespace vlkv {

struct QuantizedTensor {
  std::string name;
  GgmlType from = GgmlType::kF32;
  GgmlType to = GgmlType::kF32;
  std::string note;  // why it was kept or fell back ("" when quantized as asked)
};

struct QuantizeReport {
  std::vector<QuantizedTensor> tensors;  // in file order
  uint64_t bytes_in = 0;                 // tensor data
  uint64_t bytes_out = 0;
};

// Refuses a vision projector (general.architecture "clip": its encoder reads f16/f32), an
// output path that is the input file, and a file whose tensors do not parse.
Result<QuantizeReport> quantize_model(const std::string& in_path, const std::string& out_path,
                                      const WeightTypeChoice& choice);

}  // namespace vlkv
